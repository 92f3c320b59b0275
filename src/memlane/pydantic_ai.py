"""Context governance as a pydantic-ai `history_processors` entry (optional extra `pydantic-ai`).

    from memlane.governance import GovernedHistory
    from memlane.pydantic_ai import history_processor

    history = GovernedHistory(model="gpt-4o", llm=my_llm)   # one per conversation
    agent = Agent(model, history_processors=[history_processor(history)])

pydantic-ai's messages (`ModelRequest` / `ModelResponse` and their parts) are
translated part by part into memlane's `Message` (a tool return per call id, a
response's tool calls grouped as one call step, thinking parts as reasoning),
governed by the same engine as the proxy, and translated back: a message
nothing touched comes back as the very same object; a masked tool return comes
back as a copy of its part with the preview; memlane's own messages (summary,
recalled snippets, loop note) come back as `ModelRequest`s with one
`UserPromptPart`. pydantic-ai is imported only when a new part must be built.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from memlane.governance import GovernedHistory, agovern_messages
from memlane.types import Kind, Message, ToolCall

Processor = Callable[[list[Any]], Awaitable[list[Any]]]

Source = tuple[int, int]
"""(index of the pydantic-ai message, index of its part); -1 for the whole response."""


def history_processor(history: GovernedHistory) -> Processor:
    """An async `history_processors` entry that governs the agent's message history."""

    async def process(messages: list[Any]) -> list[Any]:
        converted, sources = to_messages(messages)
        governed = await agovern_messages(converted, history)
        return from_messages(governed, messages, sources)

    return process


def to_messages(messages: Sequence[Any]) -> tuple[list[Message], dict[int, Source]]:
    """pydantic-ai messages as memlane Messages, with where each came from (by `id`)."""
    out: list[Message] = []
    sources: dict[int, Source] = {}

    def add(message: Message, source: Source) -> None:
        out.append(message)
        sources[id(message)] = source

    for index, model_message in enumerate(messages):
        parts = list(model_message.parts)
        if getattr(model_message, "kind", "") == "response":
            for p, part in enumerate(parts):
                if part.part_kind == "thinking":
                    add(Message("assistant", str(part.content or ""), "reasoning"), (index, p))
            calls = tuple(
                ToolCall(str(part.tool_call_id), str(part.tool_name), _args(part.args))
                for part in parts
                if part.part_kind == "tool-call"
            )
            text = "".join(str(part.content) for part in parts if part.part_kind == "text")
            kind: Kind = "tool_call" if calls else "message"
            add(Message("assistant", text, kind, calls), (index, -1))
            continue
        for p, part in enumerate(parts):
            message = _request_part(part)
            if message is not None:
                add(message, (index, p))
    return out, sources


def from_messages(
    governed: Sequence[Message], original: Sequence[Any], sources: dict[int, Source]
) -> list[Any]:
    """The governed Messages as pydantic-ai messages, reusing every untouched original."""
    by_call: dict[str, Source] = {}
    for index, p in sources.values():
        if p >= 0 and original[index].kind == "request":
            part = original[index].parts[p]
            call_id = getattr(part, "tool_call_id", None)
            if part.part_kind in ("tool-return", "retry-prompt") and call_id:
                by_call[str(call_id)] = (index, p)
    builder = _Rebuilt(original)
    for message in governed:
        source = sources.get(id(message))
        if source is None and message.kind == "tool_result" and message.call_id in by_call:
            index, p = by_call[message.call_id or ""]
            builder.part(index, replace(original[index].parts[p], content=message.text), True)
        elif source is None:
            builder.whole(_new_request(message.text))
        elif source[1] < 0:
            builder.response(source[0], _thinking_of(governed, sources, source[0]))
        elif original[source[0]].kind == "request":
            builder.part(source[0], original[source[0]].parts[source[1]], False)
    return builder.done()


class _Rebuilt:
    """Collects parts per original request; reuses the original object when nothing changed."""

    def __init__(self, original: Sequence[Any]) -> None:
        self.original = original
        self.out: list[Any] = []
        self.current: int | None = None
        self.parts: list[Any] = []
        self.changed = False

    def part(self, index: int, part: Any, changed: bool) -> None:
        if self.current != index:
            self.flush()
            self.current = index
        self.parts.append(part)
        self.changed = self.changed or changed

    def whole(self, message: Any) -> None:
        self.flush()
        self.out.append(message)

    def response(self, index: int, thinking: list[int]) -> None:
        response = self.original[index]
        parts = [
            part
            for p, part in enumerate(response.parts)
            if part.part_kind != "thinking" or p in thinking
        ]
        same = len(parts) == len(response.parts)
        self.whole(response if same else replace(response, parts=parts))

    def flush(self) -> None:
        if self.current is not None:
            source = self.original[self.current]
            same = not self.changed and len(self.parts) == len(source.parts)
            self.out.append(source if same else replace(source, parts=self.parts))
        self.current, self.parts, self.changed = None, [], False

    def done(self) -> list[Any]:
        self.flush()
        return self.out


def _thinking_of(governed: Sequence[Message], sources: dict[int, Source], index: int) -> list[int]:
    """Indices of the response's thinking parts that governance kept (stripped ones are gone)."""
    kept: list[int] = []
    for message in governed:
        source = sources.get(id(message))
        if source is not None and source[0] == index and source[1] >= 0:
            kept.append(source[1])
    return kept


def _request_part(part: Any) -> Message | None:
    kind = part.part_kind
    if kind == "system-prompt":
        return Message("system", str(part.content))
    if kind == "user-prompt":
        content = part.content
        text = (
            content
            if isinstance(content, str)
            else " ".join(c for c in content if isinstance(c, str))
        )
        return Message("user", text)
    if kind in ("tool-return", "retry-prompt") and getattr(part, "tool_call_id", None):
        content = part.content
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        return Message(
            "tool", text, "tool_result", call_id=str(part.tool_call_id), name=part.tool_name
        )
    if kind == "retry-prompt":
        return Message("user", str(part.content))
    return None


def _args(args: Any) -> str:
    if args is None:
        return ""
    return args if isinstance(args, str) else json.dumps(args, sort_keys=True, default=str)


def _new_request(text: str) -> Any:
    messages = importlib.import_module("pydantic_ai.messages")
    return messages.ModelRequest(parts=[messages.UserPromptPart(content=text)])
