"""A turn's writes, queued to the store's writer behind the ones it queued before.

Every write a turn makes (its messages, what its scaffold keeps, governance's plan and
anchor, a failure's record, its answer) is queued to the store's writer
(`engine.writes`) under its session, in the order the turn makes it: the writer commits
them in that order, batched with other requests' writes, while the request goes on.
`Turn.storing` is the last one queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn

T = TypeVar("T")

_KEPT: set[asyncio.Future[Any]] = set()
"""Work under way, held until it is done (the loop keeps only weak references to its
tasks)."""


def keep(task: asyncio.Future[T]) -> asyncio.Future[T]:
    _KEPT.add(task)
    task.add_done_callback(_KEPT.discard)
    return task


def queue(
    rt: Runtime,
    turn: Turn,
    write: Callable[[], T],
    *,
    messages: bool = False,
    awaited: bool = False,
    linger: bool = False,
    read_next: bool = True,
) -> asyncio.Future[T]:
    """Queue `write`, one of the turn's writes; its outcome arrives in the future, which
    need not be awaited (an error nobody awaits is logged where it matters). `messages`:
    it stores the client's messages, so when it does not commit the turn is lost (its
    answer, queued behind it, is not stored either: the next request resends both).
    `awaited`: the request waits for it; `linger`: queued while the request is still
    being prepared (`GroupCommit`); `read_next`: the session's next turn waits for it
    (`Writes.queue`)."""
    failed = (lambda: setattr(turn, "lost", True)) if messages else None
    future = rt.writes.queue(
        turn.session_of, write, failed=failed, awaited=awaited, linger=linger, read_next=read_next
    )
    turn.storing = future
    return future
