"""A request's exact token count, made off its front: once, while it is upstream.

A request that fits by its size alone is forwarded uncounted (`flow.govern`); its exact
count is only reported (the `X-Memlane-Context` header, the turn's record). It used to
be counted on a worker thread the moment the request was forwarded. With an upstream
that answers at once the answer's headers then waited for that thread, which shared the
GIL with the turn's store: 2.9 ms p50 of a new session's +6.1 ms (back to back, 20
messages), against 0.6 ms for counting on the loop. So the count runs on the event loop
`AFTER_SECONDS` after the request was forwarded, when the loop has nothing else to do
(the client waits on the upstream), or as soon as the answer needs it, whichever comes
first; while other requests are in memlane's hands it goes to a worker thread, as the
loop is theirs (`threads.RequestTraffic`), and so does a large request's (a coding
agent's first request can be hundreds of kB: about 6 ms of encoding per 100 kB), which
would hold up its own stream's first bytes and any request arriving meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from memlane.engine import threads

log = logging.getLogger("memlane.governance")

AFTER_SECONDS = 0.002
"""How long after the request is forwarded its count starts: its bytes are on their way
by then (the upstream client writes them in a task of its own). Starting 0.3 ms after
read worse: +7.0 and +4.7 ms against +3.3 and +3.0 for back-to-back new sessions."""

ON_LOOP_CHARS = 32_000
"""The most text counted on the event loop (about 2 ms of encoding); more goes to a worker
thread, where tiktoken lets go of the GIL while it encodes."""


class Counting:
    """`count()` once, its tokens handed to `report`; a failure leaves the counts out
    (they are reported, not needed). Used from the event loop only."""

    def __init__(
        self, count: Callable[[], int], report: Callable[[int], None], *, key: str, chars: int
    ) -> None:
        """`chars`: the length of the text `count` encodes, which decides where it runs."""
        self._count = count
        self._report = report
        self._key = key
        self._small = chars <= ON_LOOP_CHARS
        self._started = False
        self._thread: asyncio.Future[int] | None = None

    def soon(self) -> None:
        """Start a moment from now, unless the answer needs the count before. The request
        is with the upstream then, not in memlane's hands: any request that is, is
        another's."""
        loop = asyncio.get_running_loop()
        loop.call_later(AFTER_SECONDS, lambda: self._start(here=not threads.TRAFFIC.busy))

    @property
    def finished(self) -> bool:
        """The count is in (or left out): nothing to wait for."""
        return self._started and (self._thread is None or self._thread.done())

    async def done(self) -> None:
        """Once the count is in (or left out). Never raises. The caller's request is in
        memlane's hands: it counts here when no other is."""
        self._start(here=threads.TRAFFIC.alone)
        if self._thread is not None and not self._thread.done():
            await asyncio.wait([self._thread])

    def _start(self, *, here: bool) -> None:
        if self._started:
            return
        self._started = True
        if not (here and self._small):
            self._thread = threads.in_a_request_thread(self._count)
            self._thread.add_done_callback(self._counted)
            return
        try:
            tokens = self._count()
        except Exception as exc:
            self._failed(exc)
        else:
            self._report(tokens)

    def _counted(self, future: asyncio.Future[int]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self._failed(error)
        else:
            self._report(future.result())

    def _failed(self, exc: BaseException) -> None:
        log.warning("could not count the tokens of %s: %r", self._key[:8], exc)
