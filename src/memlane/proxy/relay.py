"""Relaying an upstream stream to the client as it arrives, with a tee for the final answer.

Every chunk is sent on the moment it is read (no buffering, no re-encoding);
a copy goes through an SSE decoder into the wire format's assembler. A client
that disconnects cancels the upstream read at once (a watcher task listens for
`http.disconnect`, since a silent upstream would otherwise hide it). Whatever
happens, `settle` runs exactly once, shielded from cancellation: after the end
of a complete stream (storing the answer never delays it), and before the error
frame of a broken one (the failure is recorded before the client hears of it). A
stream a graceful stop cuts (its grace ran out: uvicorn cancels the request) ends
the same way, with an error event saying so.
A complete answer is settled as its last event is about to be relayed (many
clients stop reading there and send their next turn at once): its store is
queued then, ahead of anything the client's next request queues
(`engine.writes`), and awaited there only when the client will not resend it
(`pipeline.finish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Protocol

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from memlane.proxy.errors import STOPPED, STOPPING, stop_handled
from memlane.proxy.forward import UpstreamError, UpstreamResponse, UpstreamTimeout
from memlane.proxy.wire.base import StreamAssembler
from memlane.text.sse import SSEDecoder, encode

log = logging.getLogger("memlane.proxy")


class Outcome(enum.Enum):
    """How a relayed stream ended; its value says so in a log line."""

    DONE = "ended"
    """The upstream ended its stream (the assembler decides whether it finished properly)."""
    CUT = "broke off upstream"
    """The upstream connection broke or timed out midway."""
    GONE = "was left by its client"
    """The client went away; the upstream call was cancelled."""
    STOPPED = "was cut by memlane's stop (MEMLANE_SHUTDOWN_GRACE_SECONDS)"
    """memlane stopped before the stream ended (`shutdown_grace_seconds` ran out)."""


Settle = Callable[[Outcome, StreamAssembler], Awaitable[None]]


class ErrorFrame(Protocol):
    """An error event in the client's wire format (`WireAdapter.stream_error`)."""

    def __call__(self, message: str, *, code: str) -> bytes: ...


Event = tuple[str | None, str]
Rewrite = Callable[[list[Event]], list[Event]]


class RelayResponse(Response):
    def __init__(
        self,
        upstream: UpstreamResponse,
        assembler: StreamAssembler,
        *,
        settle: Settle,
        error_frame: ErrorFrame,
        headers: Mapping[str, str],
        head: Sequence[bytes] = (),
        rest: AsyncIterator[bytes] | None = None,
        decoder: SSEDecoder | None = None,
        rewrite: Rewrite | None = None,
    ) -> None:
        """`head`: chunks already read from `upstream` (and fed to `assembler` through
        `decoder`), relayed first; `rest` is the same read going on. `rewrite` changes the
        events before they are relayed (and teed): they are sent re-encoded, not as read."""
        # Not Response.__init__: it would declare `content-length: 0` for the missing body.
        self.status_code = upstream.status_code
        self.background = None
        self.init_headers(dict(headers))
        self.upstream = upstream
        self.assembler = assembler
        self.settle = settle
        self.error_frame = error_frame
        self.head = head
        self.rest = rest
        self.decoder = decoder or SSEDecoder()
        self.rewrite = rewrite
        self.settled = False
        self.gone = False
        """The client disconnected."""
        self.tee_failed = False
        """The assembler raised on an event: relaying goes on, the copy stops."""
        self.delivered = False
        """The complete answer's last event was sent: a client that leaves now has it all."""
        self.close_delimited = close_delimited(upstream.headers)
        """The body ends where the connection closes: a cut looks like its end, so only
        whole events are relayed (`tail` keeps the rest until it is whole)."""
        self.tail = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outcome = Outcome.GONE
        try:
            outcome = await self._relay(receive, send)
            if outcome is not Outcome.GONE:
                with contextlib.suppress(OSError):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
                await self._settle(outcome)

    async def _relay(self, receive: Receive, send: Send) -> Outcome:
        outcome = Outcome.GONE
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            outcome = await self._unless_gone(receive, send)
        except OSError:
            pass
        # many clients hang up on the last event, while the upstream may still be closing
        # its stream: the answer they have is the turn's, not a failure
        return Outcome.DONE if outcome is Outcome.GONE and self.delivered else outcome

    async def _unless_gone(self, receive: Receive, send: Send) -> Outcome:
        """`_pump`'s outcome, or GONE once the client disconnects: a watcher task listens
        for `http.disconnect` (a silent upstream would hide it otherwise) and drops the
        upstream connection, which ends the pump's read of it. The answer being settled
        meanwhile is not interrupted (it reads nothing upstream), and a cancel of this
        task (a shutdown) is raised as it comes. One plain task: an anyio task group per
        request cost about 4% of the proxy's CPU under load (`load.py`)."""

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.gone = True
            self.upstream.abort()

        watcher = asyncio.create_task(watch())
        try:
            outcome = await self._pump(send)
        except asyncio.CancelledError:  # a graceful stop's grace ran out
            stop_handled()
            outcome = await self._stopped(send)
        finally:
            watcher.cancel()
        return Outcome.GONE if self.gone else outcome

    async def _pump(self, send: Send) -> Outcome:
        decoder = self.decoder
        for chunk in self.head:
            if self.assembler.complete:
                await self._settle(Outcome.DONE)
            await self._send(send, chunk)
        try:
            async for chunk in self.rest or self.upstream.aiter_bytes():
                if self.rewrite is not None:
                    chunk = self._rewritten(decoder.feed(chunk))
                else:
                    self._tee(decoder.feed(chunk))
                if not self.tee_failed and self.assembler.complete:
                    await self._settle(Outcome.DONE)
                if self.close_delimited and self.rewrite is None:
                    chunk, self.tail = whole_events(self.tail + chunk)
                if chunk:
                    await self._send(send, chunk)
        except UpstreamError as exc:
            if self.gone:  # the client left and the watcher dropped the upstream
                return Outcome.GONE
            return await self._broke_off(send, exc)
        if self.rewrite is None:
            self._tee(decoder.close())
        else:
            rest = self._rewritten(decoder.close())
            if not self.tee_failed and self.assembler.complete:
                await self._settle(Outcome.DONE)
            if rest:
                await self._send(send, rest)
        if self._ended_early():
            return await self._broke_off(send, None)
        if self.tail:  # a complete answer whose last event had no blank line after it
            await self._send(send, self.tail)
        return Outcome.DONE

    def _ended_early(self) -> bool:
        """A body that ends where its connection closes (no length, not chunked) cannot
        tell a cut from its end: an answer without its last event was cut."""
        return self.close_delimited and not self.tee_failed and not self.assembler.complete

    async def _broke_off(self, send: Send, exc: UpstreamError | None) -> Outcome:
        """Tell the client, in its wire format, that the answer is not whole."""
        reason = "timed out" if isinstance(exc, UpstreamTimeout) else "broke off"
        message = f"the upstream stream {reason} before the answer was complete"
        return await self._ended(send, Outcome.CUT, message, "upstream_stream_error")

    async def _stopped(self, send: Send) -> Outcome:
        """memlane is stopping and the stream outlasted its grace: a complete answer
        already relayed stands; else the client is told, in its wire format."""
        if self.delivered:
            return Outcome.DONE
        return await self._ended(send, Outcome.STOPPED, STOPPED, STOPPING)

    async def _ended(self, send: Send, outcome: Outcome, message: str, code: str) -> Outcome:
        await self._settle(outcome)  # the failure is recorded before the client hears of it
        frame = self.error_frame(message, code=code)
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        return outcome

    async def _send(self, send: Send, chunk: bytes) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if self.assembler.complete and not self.tee_failed:
            self.delivered = True

    def _rewritten(self, events: list[Event]) -> bytes:
        """The events as changed by `rewrite`, teed and encoded; as read if it fails."""
        assert self.rewrite is not None
        try:
            events = self.rewrite(events)
        except Exception:
            log.warning(
                "could not rewrite an upstream stream event; relaying it as is", exc_info=True
            )
        self._tee(events)
        return encode(events)

    def _tee(self, events: Iterable[tuple[str | None, str]]) -> None:
        """Copy events into the assembler; one that breaks it stops the copy, never the relay."""
        if self.tee_failed:
            return
        try:
            for event, data in events:
                self.assembler.feed(event, data)
        except Exception:
            self.tee_failed = True
            log.warning("could not read an upstream stream event; relaying it as is", exc_info=True)

    async def _settle(self, outcome: Outcome) -> None:
        if self.settled:
            return
        self.settled = True
        if self.tee_failed and outcome is Outcome.DONE:
            outcome = Outcome.CUT  # nothing trustworthy to store: the turn is marked failed
        with anyio.CancelScope(shield=True):
            try:
                await self.settle(outcome, self.assembler)
            except Exception:
                log.exception("recording the streamed turn failed; the client got its answer")


def close_delimited(headers: Mapping[str, str]) -> bool:
    """Whether a response's body has no length and no chunking: it ends at the close."""
    lowered = {name.lower(): value for name, value in headers.items()}
    chunked = "chunked" in lowered.get("transfer-encoding", "").lower()
    return "content-length" not in lowered and not chunked


EVENT_ENDS = (b"\r\n\r\n", b"\n\n", b"\r\r")


def whole_events(data: bytes) -> tuple[bytes, bytes]:
    """`data` split after its last complete SSE event: what may be relayed, what waits."""
    end = max((data.rfind(mark) + len(mark) if mark in data else 0) for mark in EVENT_ENDS)
    return data[:end], data[end:]
