"""The fail-open boundary: memlane's own best-effort work never breaks a request.

Recall, re-injection, the scaffold, governance's extras, storing the answer,
indexing and extraction are memlane's additions to a request. When one of them
raises, or (recall) takes longer than its deadline, the request goes on without
it: the stage's fallback is used, one line is logged, the failure is counted on
the runtime's activity (`memlane status`, `memlane doctor`) and recorded as a
`stage.failed` event of the session. Pre-flight refusals and unreadable input
are not failures of memlane: they are raised as they are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from memlane.engine import threads, turnlog
from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn

log = logging.getLogger("memlane.failopen")

T = TypeVar("T")

EVENT = "stage.failed"
STRICT: tuple[type[BaseException], ...] = (ContextOverflow,)
"""Errors that are answers to the client, not failures: never swallowed."""


async def best_effort(
    rt: Runtime,
    turn: Turn | None,
    stage: str,
    work: Awaitable[T],
    fallback: T,
    *,
    deadline_ms: int | None = None,
) -> T:
    """`await work`, or `fallback` when it fails or overruns `deadline_ms`."""
    try:
        if deadline_ms is None:
            return await work
        async with asyncio.timeout(deadline_ms / 1000):
            return await work
    except STRICT:
        raise
    except TimeoutError:
        reason = f"took longer than its deadline of {deadline_ms} ms"
        await record(rt, turn, stage, reason, "TimeoutError")
    except Exception as exc:
        log.debug("stage %s failed", stage, exc_info=True)
        await record(rt, turn, stage, str(exc) or type(exc).__name__, type(exc).__name__)
    return fallback


def _kept(rt: Runtime, session_id: str | None, payload: dict[str, str]) -> None:
    """Counted for the day and (for a stored session) kept as its event; never raises. A
    transaction of its own: written inside one of the store's writes (`record_here`), its
    failure undoes it alone."""
    try:
        with rt.store.transaction():
            turnlog.count(rt.store, {turnlog.STAGE_FAILURES: 1})
            if session_id is not None:
                rt.store.add_event(session_id, EVENT, payload)
    except Exception:
        log.warning("could not record the failure of %s", payload["stage"], exc_info=True)


async def record(rt: Runtime, turn: Turn | None, stage: str, reason: str, kind: str) -> None:
    """Log, count and (for a stored session) record one failure; never raises, never waits:
    the record is queued to the store's writer behind the turn's own writes (a new
    session's row first: the record reads the session's id when it is written)."""
    session_id = turn.session.id if turn is not None and turn.session is not None else None
    payload = _noted(rt, session_id or "-", stage, reason, kind)
    if turn is None:
        rt.writes.queue(None, lambda: _kept(rt, None, payload))
        return
    rt.writes.queue(
        turn.session_of, lambda: _kept(rt, turn.session.id if turn.session else None, payload)
    )


def record_here(rt: Runtime, session_id: str | None, stage: str, reason: str, kind: str) -> None:
    """`record`, from inside one of the store's writes (it is written with them)."""
    _kept(rt, session_id, _noted(rt, session_id or "-", stage, reason, kind))


async def record_for(
    rt: Runtime, session_id: str | None, stage: str, reason: str, kind: str
) -> None:
    """`record` for work that outlived its turn (background work knows only the session)."""
    payload = _noted(rt, session_id or "-", stage, reason, kind)
    await threads.to_thread(_kept, rt, session_id, payload)


def _noted(rt: Runtime, session: str, stage: str, reason: str, kind: str) -> dict[str, str]:
    """Logged and counted on the runtime's activity; the payload of its event."""
    log.warning("%s skipped for session %s: %s (%s)", stage, session[:8], reason[:300], kind)
    rt.activity.failure(stage, f"{kind}: {reason[:300]}")
    return {"stage": stage, "error": reason[:2000], "type": kind}
