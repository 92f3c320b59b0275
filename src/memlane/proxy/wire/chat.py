"""Chat Completions (`POST /v1/chat/completions`): `messages` in, `choices` or chunks out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from memlane.engine.turn import Answer
from memlane.proxy.wire.base import (
    EventAssembler,
    OpenAIErrors,
    ParsedRequest,
    WireError,
    content_text,
    message_role,
    model_and_stream,
    openai_error,
    position,
    require,
    sse_event,
    token_count,
)
from memlane.types import Kind, Message, Role, ToolCall, Wire
from memlane.types.resent import FRESH, Resend

ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def parse_message(item: Any, param: str) -> Message:
    """One chat message as a `Message`, keeping the item as its `raw`."""
    role = message_role(item, param, ROLES)
    text = content_text(item.get("content"), f"{param}.content")
    if role == "assistant":
        calls = _tool_calls(item.get("tool_calls"), f"{param}.tool_calls")
        kind: Kind = "tool_call" if calls else "message"
        return Message("assistant", text, kind, calls, raw=item, wire="chat")
    if role in ("tool", "function"):
        call_id = item.get("tool_call_id", item.get("name"))
        require(
            call_id is None or isinstance(call_id, str),
            f"{param}.tool_call_id must be a string",
            f"{param}.tool_call_id",
        )
        name = item.get("name") if isinstance(item.get("name"), str) else None
        return Message(
            "tool", text, "tool_result", call_id=call_id, name=name, raw=item, wire="chat"
        )
    return Message(cast(Role, role), text, raw=item, wire="chat")  # system, developer or user


def _parse_item(item: Any, index: int) -> tuple[Message]:
    return (parse_message(item, f"messages[{index}]"),)


def _tool_calls(calls: Any, param: str) -> tuple[ToolCall, ...]:
    if calls is None:
        return ()
    require(isinstance(calls, list), f"{param} must be a list", param)
    out: list[ToolCall] = []
    for index, call in enumerate(calls):
        where = f"{param}[{index}]"
        require(isinstance(call, dict), f"{where} must be an object", where)
        function = call.get("function") or {}
        require(isinstance(function, dict), f"{where}.function must be an object", where)
        name, arguments = function.get("name", ""), function.get("arguments", "")
        require(isinstance(name, str), f"{where}.function.name must be a string", where)
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        out.append(ToolCall(str(call.get("id") or ""), name, arguments))
    return tuple(out)


def to_wire(message: Message) -> dict[str, Any]:
    """A message memlane wrote (or changed) as a chat item."""
    if message.wire == "chat" and message.raw is not None:
        return dict(message.raw)
    if message.kind == "tool_result":
        return {"role": "tool", "tool_call_id": message.call_id or "", "content": message.text}
    if message.role == "assistant":
        item: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        return item
    return {"role": message.role, "content": message.text}


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as a chat `messages` list (reasoning items have no chat form: left out)."""
    return [to_wire(m) for m in messages if m.kind != "reasoning"]


@dataclass
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatAssembler(EventAssembler):
    """Rebuilds the assistant message from `chat.completion.chunk` events (choice 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _CallParts] = {}
        self.finished = False
        self.done = False
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def _ended(self) -> bool:
        return self.done

    def feed(self, event: str | None, data: str) -> None:
        if data.strip() == "[DONE]":
            self.finished = self.done = True
            return
        super().feed(event, data)

    def _take(self, kind: Any, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            error = chunk["error"]
            self._error = str(error.get("message") if isinstance(error, dict) else error)
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = token_count(usage.get("prompt_tokens"))
            self.completion_tokens = token_count(usage.get("completion_tokens"))
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: Mapping[str, Any]) -> None:
        if choice.get("finish_reason"):
            self.finished = True
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        reasoning = delta.get("reasoning_content", delta.get("reasoning"))
        if isinstance(reasoning, str):
            self.reasoning.append(reasoning)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            index = position(call.get("index"), len(self.calls))
            parts = self.calls.setdefault(index, _CallParts())
            parts.id = parts.id or str(call.get("id") or "")
            function = call.get("function") or {}
            if isinstance(function, dict):
                parts.name = parts.name or str(function.get("name") or "")
                if isinstance(function.get("arguments"), str):
                    parts.arguments.append(function["arguments"])

    def answer(self) -> Answer:
        failed = not self.finished or self._error is not None or self.garbled
        if failed:
            return Answer([], failed=True)
        item: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            item["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            item["tool_calls"] = [
                {
                    "id": p.id,
                    "type": "function",
                    "function": {"name": p.name, "arguments": "".join(p.arguments)},
                }
                for _, p in sorted(self.calls.items())
            ]
        message = parse_message(item, "answer")
        return Answer([message], self.prompt_tokens, self.completion_tokens)


class ChatAdapter(OpenAIErrors):
    wire: Wire = "chat"
    path = "/chat/completions"

    def parse(self, body: Any, reuse: Resend = FRESH) -> ParsedRequest:
        model, stream = model_and_stream(body)
        items = body.get("messages")
        require(
            isinstance(items, list) and bool(items), "messages must be a non-empty list", "messages"
        )
        return ParsedRequest(body, reuse.parse(items, _parse_item), model, stream)

    def render(self, parsed: ParsedRequest, messages: Sequence[Message]) -> dict[str, Any]:
        return {**parsed.body, "messages": wire_messages(messages)}

    def answer_from_json(self, data: Any) -> Answer:
        try:
            choice = data["choices"][0]
            message = parse_message(choice["message"], "choices[0].message")
        except (KeyError, IndexError, TypeError, WireError):
            return Answer([], failed=True)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Answer(
            [message],
            token_count(usage.get("prompt_tokens")),
            token_count(usage.get("completion_tokens")),
        )

    def assembler(self) -> ChatAssembler:
        return ChatAssembler()

    def stream_error(self, message: str, *, code: str) -> bytes:
        return sse_event(openai_error(message, type="upstream_error", code=code))
