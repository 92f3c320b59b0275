"""The assistant's answer in Anthropic Messages: a whole `message`, or its stream of events.

The stream (`message_start`, `content_block_start` / `_delta` / `_stop`,
`message_delta`, `message_stop`, `ping`, `error`) is read on the side while it is
relayed: text deltas are joined, a `tool_use` input is assembled from its
`input_json_delta` pieces, a `thinking` block gets its text and its signature,
and usage keeps the cache read / creation figures. Events memlane does not know
(and malformed ones) are skipped: they never stop the relay, only what cannot be
read is left out of the stored turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memlane.engine.turn import Answer
from memlane.proxy.wire.anthropic_blocks import block_message
from memlane.proxy.wire.base import EventAssembler, loads, token_count
from memlane.types import Message

_TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0

    @classmethod
    def of(cls, usage: Any, before: Usage | None = None) -> Usage:
        """`usage` read over `before` (a `message_delta` repeats only what changed)."""
        base = before or cls()
        if not isinstance(usage, dict):
            return base

        def pick(name: str, current: int) -> int:
            return token_count(usage[name]) if name in usage else current

        return cls(
            pick("input_tokens", base.input),
            pick("output_tokens", base.output),
            pick("cache_read_input_tokens", base.cache_read),
            pick("cache_creation_input_tokens", base.cache_creation),
        )


def answer_of(blocks: list[Mapping[str, Any]], usage: Usage) -> Answer:
    """The stored turn: one item per block (`raw`: the block as its own assistant message)."""
    messages: list[Message] = []
    for block in blocks:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            continue
        raw = {"role": "assistant", "content": [dict(block)]}
        try:
            messages.append(block_message(block, "assistant", raw, continues=bool(messages)))
        except RecursionError:  # a block nested too deep to write down is not stored
            continue
    # Anthropic's input_tokens leave out what was read from or written to the cache: the
    # prompt the turn cost is the three together.
    prompt = usage.input + usage.cache_read + usage.cache_creation
    return Answer(
        messages,
        prompt,
        usage.output,
        cache_read_tokens=usage.cache_read,
        cache_creation_tokens=usage.cache_creation,
    )


def answer_from_json(data: Any) -> Answer:
    if not isinstance(data, dict) or data.get("type") == "error":
        return Answer([], failed=True)
    content = data.get("content")
    if not isinstance(content, list):
        return Answer([], failed=True)
    return answer_of(content, Usage.of(data.get("usage")))


@dataclass
class _Block:
    data: dict[str, Any]
    pieces: list[str] = field(default_factory=list)
    """`input_json_delta` fragments of a tool block, joined at its end."""


ANSWER_EVENTS = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop"}
    | {"message_delta", "message_stop"}
)
"""The Messages stream's events that carry the answer `MessagesAssembler` puts together."""


class MessagesAssembler(EventAssembler):
    """Rebuilds the assistant message from the stream's events, whatever their chunking."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, _Block] = {}
        self.usage = Usage()
        self.stopped = False

    def _ended(self) -> bool:
        return self.stopped

    def _may_be_a_piece(self, event: str | None) -> bool:
        """Every event is named here: a `ping` or a kind from a later API version memlane
        cannot read holds nothing of the answer it puts together."""
        return event is None or event in ANSWER_EVENTS

    def _take(self, kind: Any, payload: dict[str, Any]) -> None:
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                self.usage = Usage.of(message.get("usage"), self.usage)
        elif kind == "content_block_start":
            block = payload.get("content_block")
            index = payload.get("index")
            if isinstance(block, dict) and isinstance(index, int):
                self.blocks[index] = _Block(dict(block))
        elif kind == "content_block_delta":
            self._delta(payload.get("index"), payload.get("delta"))
        elif kind == "message_delta":
            self.usage = Usage.of(payload.get("usage"), self.usage)
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            error = payload.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self._error = str(message or "error")

    def _delta(self, index: Any, delta: Any) -> None:
        block = self.blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(delta, dict):
            return
        kind, data = delta.get("type"), block.data
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            data["text"] = str(data.get("text", "")) + delta["text"]
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block.pieces.append(delta["partial_json"])
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            data["thinking"] = str(data.get("thinking", "")) + delta["thinking"]
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            data["signature"] = str(data.get("signature", "")) + delta["signature"]
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            citations = data.get("citations")
            data["citations"] = [
                *(citations if isinstance(citations, list) else []),
                delta["citation"],
            ]

    def answer(self) -> Answer:
        if not self.stopped or self._error is not None or self.garbled:
            return Answer([], failed=True)
        blocks: list[Mapping[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            data = block.data
            if data.get("type") in _TOOL_BLOCKS and block.pieces:
                try:
                    data["input"] = loads("".join(block.pieces))
                except (ValueError, RecursionError):  # unreadable: the client got them as sent
                    data["input"] = {}
            blocks.append(data)
        return answer_of(blocks, self.usage)
