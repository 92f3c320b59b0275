"""What memlane's own tools look like in each wire format: definitions, and taking them back out.

The tool loop (`proxy.tool_loop`) is the same for every format; this module holds
the few format-specific pieces it needs:

- `definition(spec)`: a function tool as the format declares one;
- `first_output(data)`: whether a streamed event starts answer text or a tool call
  (the loop relays a round that starts with text as it arrives; Anthropic's thinking
  blocks come first and decide nothing);
- `strip_json(data, names)` / `stripper(names)`: an answer (whole, or streamed
  event by event) without memlane's calls, for a round the client gets that also
  called memlane's tools. Output positions are renumbered so the client sees a
  well-formed answer.

A new wire format adds one class here and registers it in `TOOL_WIRES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from memlane.proxy.wire.base import dumps, loads

Output = Literal["text", "tool"]
Event = tuple[str | None, str]


class ToolWire(Protocol):
    def definition(self, name: str, description: str, parameters: Mapping[str, Any]) -> Any: ...

    def declared(self, tool: Any) -> str | None:
        """The name of a tool the client declared (to avoid declaring one twice)."""
        ...

    def first_output(self, data: Any) -> Output | None: ...

    def strip_json(self, data: Any, names: frozenset[str]) -> Any: ...

    def stripper(self, names: frozenset[str]) -> Stripper:
        """A filter for one streamed answer, fed its events in order as they come."""
        ...


class Stripper(Protocol):
    def feed(self, events: Sequence[Event]) -> list[Event]:
        """The events without memlane's calls (an event left as it was keeps its text)."""
        ...


def strip_events(wire: ToolWire, events: Sequence[Event], names: frozenset[str]) -> list[Event]:
    return wire.stripper(names).feed(events)


def with_tools(wire: ToolWire, body: Mapping[str, Any], tools: Sequence[Any]) -> dict[str, Any]:
    """`body` with memlane's tool definitions after the client's own."""
    declared = body.get("tools")
    client = list(declared) if isinstance(declared, list) else []
    names = {wire.declared(tool) for tool in client}
    ours = [tool for tool in tools if wire.declared(tool) not in names]
    return {**body, "tools": [*client, *ours]}


def _loads(data: str) -> Any:
    """An event's data, or None when it is not JSON memlane can read (relayed as it is)."""
    try:
        return loads(data)  # a lone surrogate becomes U+FFFD: a rewritten event encodes
    except (ValueError, RecursionError):
        return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _index(value: Any) -> int | None:
    """A position field, when it is one (an upstream's odd value is left alone)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _EventStripper(ABC):
    """What each format's stripper shares: the names of memlane's tools, the output positions
    their calls take (learned from the event that starts each), whether a call of the
    client's was seen, and the walk over the events. An event that is not a JSON object,
    or that `_rewrite` returns unchanged, is relayed with its own text."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.ours: set[int] = set()
        self.theirs = False
        """A call of the client's was seen (else a stop for tool calls is no reason to stop)."""

    def feed(self, events: Sequence[Event]) -> list[Event]:
        kept: list[Event] = []
        for name, raw in events:
            data = _loads(raw)
            if not isinstance(data, dict):
                kept.append((name, raw))
                continue
            rewritten = self._rewrite(data)
            if rewritten is not None:
                kept.append((name, raw if rewritten is data else dumps(rewritten).decode()))
        return kept

    @abstractmethod
    def _rewrite(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The event as the client gets it: `data` itself when unchanged, None to drop it."""


class ChatTools:
    def definition(self, name: str, description: str, parameters: Mapping[str, Any]) -> Any:
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }

    def declared(self, tool: Any) -> str | None:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        return name if isinstance(name, str) else None

    def first_output(self, data: Any) -> Output | None:
        for choice in _list(data.get("choices")) if isinstance(data, dict) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            if delta.get("tool_calls"):
                return "tool"
            if isinstance(delta.get("content"), str) and delta["content"]:
                return "text"
        return None

    def strip_json(self, data: Any, names: frozenset[str]) -> Any:
        choices = []
        for choice in _list(data.get("choices")):
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                choices.append(choice)
                continue
            message = dict(choice["message"])
            calls = [c for c in _list(message.get("tool_calls")) if _call_name(c) not in names]
            message["tool_calls"] = calls or None
            if not calls:
                message.pop("tool_calls")
            finish = choice.get("finish_reason")
            if finish == "tool_calls" and not calls:
                finish = "stop"  # the client is not asked to run anything
            choices.append({**choice, "message": message, "finish_reason": finish})
        return {**data, "choices": choices}

    def stripper(self, names: frozenset[str]) -> Stripper:
        return _ChatStripper(names)


class _ChatStripper(_EventStripper):
    """Chat chunks carry a call's name on its first delta only: its index is learned there."""

    def _rewrite(self, data: dict[str, Any]) -> dict[str, Any] | None:
        if not _list(data.get("choices")):
            return data
        changed = False
        choices = []
        for choice in data["choices"]:
            if not isinstance(choice, dict):
                choices.append(choice)
                continue
            delta = choice.get("delta")
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            if self.ours and not self.theirs and choice.get("finish_reason") == "tool_calls":
                choice = {**choice, "finish_reason": "stop"}
                changed = True
            if not isinstance(delta, dict) or not isinstance(calls, list):
                choices.append(choice)
                continue
            changed = True
            for call in calls:
                if _call_name(call) in self.names:
                    self.ours.add(_call_index(call))
            rest = [
                {**c, "index": _renumber(_call_index(c), self.ours)} if isinstance(c, dict) else c
                for c in calls
                if not isinstance(c, dict) or _call_index(c) not in self.ours
            ]
            self.theirs = self.theirs or bool(rest)
            delta = {k: v for k, v in delta.items() if k != "tool_calls"}
            if rest:
                delta["tool_calls"] = rest
            choices.append({**choice, "delta": delta})
        return {**data, "choices": choices} if changed else data


class ResponsesTools:
    def definition(self, name: str, description: str, parameters: Mapping[str, Any]) -> Any:
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": False,
        }

    def declared(self, tool: Any) -> str | None:
        name = tool.get("name") if isinstance(tool, dict) else None
        return name if isinstance(name, str) else None

    def first_output(self, data: Any) -> Output | None:
        if not isinstance(data, dict):
            return None
        kind = data.get("type")
        if kind == "response.output_text.delta":
            return "text"
        item = data.get("item")
        if kind == "response.output_item.added" and isinstance(item, dict):
            if item.get("type") == "message":
                return "text"
            if str(item.get("type", "")).endswith("_call"):
                return "tool"
        return None

    def strip_json(self, data: Any, names: frozenset[str]) -> Any:
        return _without_items(data, names)

    def stripper(self, names: frozenset[str]) -> Stripper:
        return _ResponsesStripper(names)


def _without_items(response: Any, names: frozenset[str]) -> Any:
    """A Responses answer without the output items that call one of `names`."""
    output = [item for item in _list(response.get("output")) if _item_name(item) not in names]
    return {**response, "output": output}


class _ResponsesStripper(_EventStripper):
    """An output item's first event (`response.output_item.added`) names it: its output
    index is learned there, and every later event of that index is dropped."""

    def _rewrite(self, data: dict[str, Any]) -> dict[str, Any] | None:
        index = _index(data.get("output_index"))
        if index is not None and _item_name(data.get("item")) in self.names:
            self.ours.add(index)
        if index is not None and self.ours:
            if index in self.ours:
                return None
            if _renumber(index, self.ours) != index:
                data = {**data, "output_index": _renumber(index, self.ours)}
        response = data.get("response")
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            stripped = _without_items(response, self.names)
            if stripped != response:
                data = {**data, "response": stripped}
        return data


def _renumber(index: int, removed: set[int]) -> int:
    return index - sum(1 for r in removed if r < index)


def _call_index(call: Any) -> int:
    """A Chat call delta's index (0 when it has none, as a single call may leave out)."""
    index = _index(call.get("index", 0)) if isinstance(call, dict) else None
    return index if index is not None else 0


def _call_name(call: Any) -> str | None:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _item_name(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("type") == "function_call":
        name = item.get("name")
        return name if isinstance(name, str) else None
    return None


class MessagesTools:
    """Anthropic Messages: a tool has an `input_schema`; a call is a `tool_use` content block,
    and a streamed block's first event (`content_block_start`) names it."""

    def definition(self, name: str, description: str, parameters: Mapping[str, Any]) -> Any:
        return {"name": name, "description": description, "input_schema": parameters}

    def declared(self, tool: Any) -> str | None:
        name = tool.get("name") if isinstance(tool, dict) else None
        return name if isinstance(name, str) else None

    def first_output(self, data: Any) -> Output | None:
        """Thinking comes before what it leads to: it decides nothing. A `tool_use` block is a
        call; any other block (text, a server tool the upstream runs itself) is the answer."""
        if not isinstance(data, dict) or data.get("type") != "content_block_start":
            return None
        block = data.get("content_block")
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str) or kind in _THINKING:
            return None
        return "tool" if kind == "tool_use" else "text"

    def strip_json(self, data: Any, names: frozenset[str]) -> Any:
        kept = [b for b in _list(data.get("content")) if _block_name(b) not in names]
        out = {**data, "content": kept}
        if data.get("stop_reason") == "tool_use" and not any(_is_call(b) for b in kept):
            out["stop_reason"] = "end_turn"  # the client is not asked to run anything
        return out

    def stripper(self, names: frozenset[str]) -> Stripper:
        return _MessagesStripper(names)


_THINKING = ("thinking", "redacted_thinking")


class _MessagesStripper(_EventStripper):
    """Every event of a block memlane's call occupies is dropped (its index is learned from
    its `content_block_start`); later blocks move down so the indices stay contiguous, and
    `stop_reason: tool_use` becomes `end_turn` when no call of the client's is left."""

    def _rewrite(self, data: dict[str, Any]) -> dict[str, Any] | None:
        index = _index(data.get("index"))
        if data.get("type") == "content_block_start" and index is not None:
            block = data.get("content_block")
            if _block_name(block) in self.names:
                self.ours.add(index)
            elif _is_call(block):
                self.theirs = True
        if index is not None and self.ours:
            if index in self.ours:
                return None
            moved = _renumber(index, self.ours)
            if moved != index:
                return {**data, "index": moved}
        delta = data.get("delta")
        if (
            data.get("type") == "message_delta"
            and isinstance(delta, dict)
            and delta.get("stop_reason") == "tool_use"
            and self.ours
            and not self.theirs
        ):
            return {**data, "delta": {**delta, "stop_reason": "end_turn"}}
        return data


def _is_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def _block_name(block: Any) -> str | None:
    if _is_call(block):
        name = block.get("name")
        return name if isinstance(name, str) else None
    return None


TOOL_WIRES: dict[str, ToolWire] = {
    "chat": ChatTools(),
    "responses": ResponsesTools(),
    "anthropic": MessagesTools(),
}
"""By `WireAdapter.wire`."""
