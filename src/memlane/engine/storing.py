"""A turn's writes while its request is on its way upstream, and the ones queued behind them.

`pipeline.prepare` starts storing the client's messages as the request is forwarded
(`Turn.storing`); a new session's row is written first (`engine.sessions.ahead`). A write
that must come after them, and that the forwarded request does not depend on
(governance's first plan for a session, a new anchor, a new session's failure record),
is queued behind that store (`after_storing`): it is off the request's path too, where it
waited for a worker thread and, under background writes, for SQLite's write lock
(`next_turn_ab.py --new-sessions`: a new session's governance stage 2.46 → 1.35 ms p50,
its request +10.70 → +7.59 ms p90).
`pipeline.stored` (what storing the answer, and a client that will not resend its
history, wait for) waits for the queued writes as well.

A write queued before the store's worker-thread job began joins that job's commit
(`Turn.writes_behind`): a new session's row, messages, state blocks and first plan were
five commits, each taking the write lock and catching the search indexes up after it;
under a client sending new sessions back to back, the next request's own writes queued
behind them (`proxy_overhead.py`, instant upstream).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from memlane.engine import threads
from memlane.engine.turn import Turn

T = TypeVar("T")

_KEPT: set[asyncio.Future[Any]] = set()
"""Writes under way, held until they are done (the loop keeps only weak references to its
tasks)."""


def keep(task: asyncio.Future[T]) -> asyncio.Future[T]:
    _KEPT.add(task)
    task.add_done_callback(_KEPT.discard)
    return task


def after_storing(turn: Turn, write: Callable[[], None]) -> None:
    """Run `write` on a worker thread once the turn's messages, and the writes queued before
    this one, are stored; `turn.storing` covers it from now on. `write` handles its own
    failures (it is best effort); it is not run when the store before it was cancelled."""
    before = turn.storing
    if before is None:
        raise ValueError("the turn has no store under way to queue a write behind")
    if turn.writes_behind is not None:  # its store has not begun: one commit with it
        turn.writes_behind.append(write)
        return

    async def queued() -> None:
        await asyncio.wait([before])
        if before.cancelled():
            raise asyncio.CancelledError
        await threads.to_thread(write)

    turn.storing = keep(asyncio.ensure_future(queued()))


def writes_behind(turn: Turn) -> list[Callable[[], None]]:
    """The writes queued so far to join the turn's store, which begins now: a write
    queued from here on waits for it to be done (`after_storing`)."""
    queued, turn.writes_behind = turn.writes_behind or [], None
    return queued
