"""Context governance: keep a request inside the model's window without losing what matters.

`govern_turn` is the pipeline stage. The parts, each in its own module:
budget (windows, shares, learned windows), mask (pass 1), window (pass 2),
summarise, cache (cache-stable compaction), thoughts, loops, recall (dropped
history), errors (pre-flight), ledger (where decisions and dropped items are
kept), flow (one request), setup (building it from the runtime), compact
(manual compaction), library (`memlane.govern`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memlane.engine import storing, threads
from memlane.engine.governance.budget import learn_window
from memlane.engine.governance.counting import Counting
from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.types import Message

if TYPE_CHECKING:
    from memlane.engine.governance.cache import Governor, Stats
    from memlane.engine.governance.plan import Plan

__all__ = ["ContextOverflow", "counted", "govern_turn", "learn_window"]

log = logging.getLogger("memlane.governance")


async def govern_turn(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    """The messages to forward for this turn; raises `ContextOverflow` when they cannot fit.

    Ungoverned turns (`governance_clients`) are forwarded untouched.
    """
    if not rt.settings.governance_enabled or not turn.governed:
        return messages
    from memlane.engine.governance.flow import govern
    from memlane.engine.governance.setup import write_anchor

    started = time.perf_counter()
    # The thread's CPU clock is a real system call (not the vDSO's), and one that makes the
    # scheduler take stock of the thread: under load (`load.py`, 200 clients) each read
    # held the event loop 0.58 ms on average, up to 24 ms. Read only for the debug record.
    timed = log.isEnabledFor(logging.DEBUG)
    cpu_started = time.thread_time() if timed else 0.0
    gov = await _governor(rt, turn)
    # A new session's texts are unseen: counted beside the upstream call. A next turn's are
    # memoised but for its newest: counted beside it too when no other request is in hand
    # (`Counting` then counts on the loop while the request is upstream), else here, where
    # a thread trip cost more than it saved (`load.py`, 200 clients: 76-84 req/s fell to
    # 58-67 with every count deferred, each answer's headers waiting in the pool's queue
    # behind the stores).
    later = turn.made_ahead is not None or threads.TRAFFIC.alone
    save = _saver(rt, turn, gov)
    governed = await govern(gov, messages, user_text=turn.user_text, save=save, count_later=later)
    elapsed = time.perf_counter() - started
    # this thread only: what a core spent, no waiting
    cpu = time.thread_time() - cpu_started if timed else 0.0
    turn.trimmed = turn.trimmed or governed.trimmed
    turn.notes.extend(governed.stats.notes)
    if governed.counted:
        _report(turn, gov, governed.stats, elapsed, cpu)
    else:  # while the request is upstream (`counting`)
        stats = governed.stats
        turn.counting = Counting(
            lambda: gov.total(governed.messages),
            lambda tokens: _counted_later(turn, gov, stats, tokens, elapsed, cpu),
            key=turn.key,
            chars=sum(len(m.text) for m in governed.messages),
        )
        turn.counting.soon()
    if governed.stats.summarised and turn.session is not None:
        snapshot = governed.plan.snapshot
        if turn.storing is None:
            await threads.to_thread(write_anchor, rt, turn.session, snapshot)
        else:  # its session may be a row still to write (`engine.sessions.ahead`)
            _behind(rt, turn, "write the anchor", lambda: _anchor(rt, turn, snapshot))
    return governed.messages


async def _governor(rt: Runtime, turn: Turn) -> Governor:
    """The turn's governor, its learned window and its plan read. On SQLite, here: a
    memoised window read and cached tokenizers (the proxy loads every encoding at
    start-up) cost less than the thread hop, whose wake-up waits for a free core. On
    PostgreSQL a read is a round trip, and with the server gone a wait for a connection
    (up to the pool's 30 s): in a worker thread, never on the event loop, where it held
    every request of the process."""
    from memlane.engine.governance.setup import governor_for_turn

    if rt.store_kind == "sqlite":
        return governor_for_turn(rt, turn)

    def read() -> Governor:
        if turn.session is not None and not turn.continued:
            turn.stored_state(rt.store)  # the plan, read here rather than by `govern`
        return governor_for_turn(rt, turn)

    return await threads.to_thread(read)


async def counted(turn: Turn) -> None:
    """Once the turn's token counts are in (`Turn.context`, `Turn.governed_tokens`): a
    request that fit by its size alone is counted while it is upstream. Never raises."""
    if turn.counting is not None:
        await turn.counting.done()


def _counted_later(
    turn: Turn, gov: Governor, stats: Stats, tokens: int, elapsed: float, cpu: float
) -> None:
    stats.tokens_in = stats.tokens_out = tokens
    _report(turn, gov, stats, elapsed, cpu)


def _report(turn: Turn, gov: Governor, stats: Stats, elapsed: float, cpu: float) -> None:
    """What governance did, on the turn (for the answer's headers and record) and logged."""
    log.debug(
        "governed %s: %d -> %d tokens in %.1f ms (LLM %.1f ms)%s",
        turn.key,
        stats.tokens_in,
        stats.tokens_out,
        (elapsed - stats.llm_seconds) * 1000,
        stats.llm_seconds * 1000,
        " compacted" if stats.compacted else "",
        extra={
            "governance": stats,
            "governance_seconds": elapsed - stats.llm_seconds,
            "governance_cpu_seconds": cpu,
        },
    )
    turn.context = (stats.tokens_out, gov.budget.limit, stats.compacted)
    turn.window = (gov.budget.window.tokens, gov.budget.window.source)
    turn.governed_tokens = (stats.tokens_in, stats.tokens_out)


def _anchor(rt: Runtime, turn: Turn, snapshot: str) -> None:
    from memlane.engine.governance.setup import write_anchor

    if turn.session is not None:  # the session's row as written, the one the turn adopted
        write_anchor(rt, turn.session, snapshot)


def _saver(rt: Runtime, turn: Turn, gov: Governor) -> Callable[[Plan], None] | None:
    """How a changed plan (a new session's first, a new model) is saved: behind the turn's
    messages, once they are stored, not in front of the request (`engine.storing`). None
    when nothing of the turn is being stored on the way (the plan is saved at once)."""
    if turn.storing is None:
        return None
    return lambda plan: _behind(rt, turn, "save the plan", lambda: gov.ledger.save_plan(plan))


def _behind(rt: Runtime, turn: Turn, what: str, write: Callable[[], None]) -> None:
    """`write` once the turn's messages are stored; best effort: the next turn makes the
    plan (or the anchor) again, so a failure is logged and recorded, never raised."""

    def guarded() -> None:
        try:
            with rt.store.transaction():  # a failure undoes this write alone
                write()
        except Exception as exc:
            rt.activity.failure("governance", f"{what}: {type(exc).__name__}: {exc}")
            log.warning("could not %s of %s: %r", what, turn.key[:8], exc)

    storing.queue(rt, turn, guarded)
