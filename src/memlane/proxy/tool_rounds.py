"""One round of memlane's tool loop as read from the upstream: a whole answer, or a stream.

The loop (`proxy.tool_loop`) decides the same way for both: a round that calls
no memlane tool goes to the client as it came (`as_sent`); one that calls the
client's tools too goes without memlane's calls (`without`); one that calls only
memlane's is answered and asked again. These classes hold what differs: how a round
is read, how it is taken apart and how the client gets it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from starlette.responses import Response

from memlane.engine.turn import Answer
from memlane.proxy.tool_wire import ToolWire, strip_events
from memlane.proxy.wire.base import StreamAssembler, WireAdapter, dumps
from memlane.text.sse import SSEDecoder, encode


class RoundRead(Protocol):
    """A round read to its end."""

    @property
    def answer(self) -> Answer:
        """What the model answered in this round."""
        ...

    @property
    def readable(self) -> bool:
        """Whether the answer could be read at all (an unreadable one goes out as it came)."""
        ...

    def as_sent(self) -> Response:
        """The round for the client, as the upstream sent it."""
        ...

    def without(self, names: frozenset[str]) -> tuple[Answer, Response]:
        """The round without the calls to `names`: the answer that is stored for the turn,
        and what the client gets."""
        ...


@dataclass(frozen=True, slots=True)
class WholeRound:
    """A round answered in one JSON body."""

    adapter: WireAdapter
    wire: ToolWire
    body: bytes
    status: int
    headers: Mapping[str, str]
    data: Any = field(init=False)
    answer: Answer = field(init=False)

    def __post_init__(self) -> None:
        try:
            data = json.loads(self.body)
            answer = self.adapter.answer_from_json(data)
        except ValueError:
            data, answer = None, Answer([], failed=True)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "answer", answer)

    @property
    def readable(self) -> bool:
        return self.data is not None

    def as_sent(self) -> Response:
        return Response(self.body, self.status, headers=self.headers)

    def without(self, names: frozenset[str]) -> tuple[Answer, Response]:
        stripped = self.wire.strip_json(self.data, names)
        response = Response(dumps(stripped), self.status, headers=self.headers)
        return self.adapter.answer_from_json(stripped), response


@dataclass
class StreamedRound:
    """One streamed round, read until it shows whether it answers or calls tools (and then,
    unless it answers, to its end)."""

    adapter: WireAdapter
    wire: ToolWire
    chunks: AsyncIterator[bytes]
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    assembler: StreamAssembler = field(init=False)
    decoder: SSEDecoder = field(default_factory=SSEDecoder)
    head: list[bytes] = field(default_factory=list)
    events: list[tuple[str | None, str]] = field(default_factory=list)
    kind: str | None = None

    def __post_init__(self) -> None:
        self.assembler = self.adapter.assembler()

    async def until_known(self) -> str | None:
        """Read until the first text or tool call (or the end); returns which came first."""
        while self.kind is None:
            try:
                chunk = await anext(self.chunks)
            except StopAsyncIteration:
                break
            self._take(chunk)
        return self.kind

    async def to_end(self) -> None:
        async for chunk in self.chunks:
            self._take(chunk)
        self._feed(self.decoder.close())

    @cached_property
    def answer(self) -> Answer:
        """The whole round's answer (read once it is read to its end)."""
        return self.assembler.answer()

    @property
    def readable(self) -> bool:
        return not self.answer.failed

    def as_sent(self) -> Response:
        return _buffered(b"".join(self.head), self.status, self.headers)

    def without(self, names: frozenset[str]) -> tuple[Answer, Response]:
        events = strip_events(self.wire, self.events, names)
        stripped = self.adapter.assembler()
        for event, data in events:
            stripped.feed(event, data)
        return stripped.answer(), _buffered(encode(events), self.status, self.headers)

    def _take(self, chunk: bytes) -> None:
        self.head.append(chunk)
        self._feed(self.decoder.feed(chunk))

    def _feed(self, events: list[tuple[str | None, str]]) -> None:
        for event, data in events:
            self.events.append((event, data))
            self.assembler.feed(event, data)
            if self.kind is None:
                try:
                    self.kind = self.wire.first_output(json.loads(data))
                except (ValueError, RecursionError):  # unreadable: it tells nothing
                    continue


def _buffered(body: bytes, status: int, headers: Mapping[str, str]) -> Response:
    out = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    return Response(body, status, headers=out, media_type="text/event-stream")
