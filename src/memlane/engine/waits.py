"""Every wait memlane makes on a request's behalf ends: no client waits on memlane forever.

Between a request's arrival and its answer, memlane awaits its own work: the session's
earlier writes (`engine.writes`), the turn's messages where the request depends on them
(`pipeline.stored`), reading and shaping the request in a worker thread, the answer's
store where it must be durable first, governance, a deferred token count. Each is
awaited through `within`, and together they are bounded by `request_wait_seconds`
(`MEMLANE_REQUEST_WAIT_SECONDS`): what one wait spent is gone for the next
(`Turn.waited`). With PostgreSQL gone, each store hop waits for a connection that never
comes; bounded one by one, five of them in a row kept a client 25-30 s past a 5 s
setting. Past it the request goes on without that work, like any best-effort stage
(`engine.failopen`):
the client is answered, the overrun is logged once and recorded as a `stage.failed`
event of stage `wait`, and the work itself is not cancelled: it finishes on its own,
its failure logged then. The upstream's own time is bounded separately
(`upstream_timeout`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from memlane.engine import failopen
from memlane.engine.runtime import Runtime
from memlane.engine.storing import keep
from memlane.engine.turn import Turn

log = logging.getLogger("memlane.waits")

T = TypeVar("T")

STAGE = "wait"
"""The stage an overrun is recorded under (`failopen.EVENT`)."""


async def within(rt: Runtime, turn: Turn | None, what: str, work: Awaitable[T], late: T) -> T:
    """`await work`, or `late` once it has taken what is left of the request's wait
    (`left`): the overrun is logged and recorded, and `work` goes on by itself (it is
    never cancelled here, nor when the caller is)."""
    future = asyncio.ensure_future(work)
    if not future.done():
        keep_running(future)  # its caller may be cancelled: the work still ends
        with spending(turn):
            await asyncio.wait([future], timeout=left(rt, turn))
    if future.done():
        return future.result()
    future.add_done_callback(lambda done: _late_failure(what, done))
    overran(rt, turn, what)
    return late


def left(rt: Runtime, turn: Turn | None) -> float:
    """Seconds the request may still wait on memlane's own work: `request_wait_seconds`
    less what its earlier waits took (all of it for work no turn is known for yet)."""
    spent = turn.waited if turn is not None else 0.0
    return max(0.0, rt.settings.request_wait_seconds - spent)


@contextmanager
def spending(turn: Turn | None) -> Iterator[None]:
    """Around a wait on memlane's own work: its time is taken from the turn's (`left`)."""
    started = time.monotonic()
    try:
        yield
    finally:
        if turn is not None:
            turn.waited += time.monotonic() - started


def overran(rt: Runtime, turn: Turn | None, what: str) -> None:
    """Log and record that `what` outlasted the request's wait; never waits itself (the
    record is a store write, and the store may be what is slow)."""
    reason = (
        f"{what} took longer than {rt.settings.request_wait_seconds:g} s "
        "(MEMLANE_REQUEST_WAIT_SECONDS); the request went on without it"
    )
    keep_running(asyncio.ensure_future(failopen.record(rt, turn, STAGE, reason, "TimeoutError")))


def keep_running(future: asyncio.Future[T]) -> None:
    """Hold a reference to `future` until it is done (the loop keeps weak ones only)."""
    keep(future)


def _late_failure(what: str, future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        log.warning("%s failed after its request went on: %r", what, error)
