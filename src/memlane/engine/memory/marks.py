"""How far each session's turns are remembered: the mark that makes queued memory work durable.

A finished turn's memory work (its turn entries, the facts extracted from it) waits in
a batch in memory (`engine.background`), so a stop or a crash would lose it. The
session's stored messages hold everything that work needs, so the store also keeps,
per session, the position up to which its turns are remembered (the session state
`MARK`): every stored turn at or past it still has memory work to do, and
`engine.memory.resume` queues it again when memlane starts.

- The mark is set where the turn's messages are stored, in their commit
  (`note_first_turn`), the first time memlane stores a turn of the session: from the
  position of that turn's first new message (a session that existed before marks did
  is not remembered again from its start).
- A batch's job moves it past the turns it remembered (`advance`), once their work is
  done; a job that is stopped midway, or fails, leaves it where it was (a failed
  session's later jobs then record their turns, below, `engine.memory.failures`).
- Where several processes take a session's turns (`serve --workers`, replicas on
  PostgreSQL), one may finish a later turn while another still works on an earlier one.
  There the job records the turns it did (`record_done`): the mark moves only past
  answered turns that are all done, and the done ones beyond it are kept (`DONE`), so a
  crash of the other process leaves its turn to the next start, and only that one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from memlane.config import Settings
from memlane.store import Store

MARK = "memory.remembered"
"""Session state: the message position from which the session's turns are not remembered
yet (a decimal number)."""
DONE = "memory.remembered.past"
"""Session state: the positions past the mark whose turns are remembered already (decimal
numbers, space-separated), where another process still works on a turn before them."""


def wanted(settings: Settings) -> bool:
    """Whether memory work follows a turn at all (nothing to keep a mark for otherwise)."""
    return settings.memory_enabled and (
        settings.memory_store_turns or settings.memory_extract_facts
    )


def note_first_turn(
    store: Store, session_id: str, state: dict[str, str], first_new: int | None
) -> None:
    """Set the mark at `first_new` (the turn's first new message) unless the session has one
    (`state`: the session's state as read for the turn). Call inside the turn's commit."""
    if first_new is None or MARK in state:
        return
    store.set_state(session_id, MARK, str(first_new))
    state[MARK] = str(first_new)


def read(state: dict[str, str]) -> int | None:
    """The mark in a session's state; None when it has none (or an unreadable one)."""
    value = state.get(MARK)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def advance(store: Store, session_id: str, past: int) -> None:
    """The session's turns before position `past` are remembered: the mark moves there, never
    back (a later batch's job may have moved it further)."""
    with store.transaction():
        current = read(store.get_state(session_id))
        if current is None or past > current:
            store.set_state(session_id, MARK, str(past))


def read_done(state: dict[str, str]) -> frozenset[int]:
    """The positions past the mark already remembered (`DONE`); unreadable ones are left out
    (their turns are only done again)."""
    return frozenset(int(word) for word in state.get(DONE, "").split() if word.isdigit())


def record_done(
    store: Store,
    session_id: str,
    positions: Collection[int],
    answered: Callable[[int], Sequence[int]],
) -> None:
    """The turns at `positions` are remembered, where other processes take some of the
    session's turns: the mark moves past the answered turns (`answered(mark)`: their
    positions at or past it, ascending) up to the first one not remembered yet, and the
    remembered ones beyond it are kept in `DONE`. One session's record at a time across
    processes (`Store.batch`)."""
    with store.batch():
        state = store.get_state(session_id)
        current = read(state)
        if current is None:
            return
        done = read_done(state) | set(positions)
        mark = current
        for position in answered(current):
            if position not in done:
                break
            mark = position + 1
        left = " ".join(str(p) for p in sorted(done) if p >= mark)
        if mark > current:
            store.set_state(session_id, MARK, str(mark))
        if left != state.get(DONE, ""):
            store.set_state(session_id, DONE, left or None)
