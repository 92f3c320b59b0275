"""A session's queued turns cost one job and one book write, and past the background
queue's bound they wait as their session's key only, none lost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.memory import marks
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.ingest import queue
from memlane.engine.memory.resume import pending_turns
from memlane.engine.memory.turn_input import Reread, TurnInput, held_bytes
from memlane.engine.runtime import Runtime
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message

TURNS = 20


def runtime(settings: Settings, store: SQLiteStore) -> Runtime:
    """Turn entries only (no extraction: no model), batches that only fill or drain."""
    update = {"memory_extract_facts": False, "memory_batch_quiet_seconds": 60}
    return Runtime(settings.model_copy(update=update), store)


def stored_conversation(rt: Runtime, turns: int) -> str:
    """A session with `turns` answered turns stored, none remembered yet (its mark at 0)."""
    session = rt.store.ensure_session("k", namespace="repo")
    messages = []
    for n in range(turns):
        messages += [Message("user", f"question {n}"), Message("assistant", f"answer {n}")]
    rt.store.append_messages(session.id, [NewMessage(m, 1) for m in messages])
    rt.store.set_state(session.id, marks.MARK, "0")
    return session.id


def counted_writes(book: MemoryBook, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many entries each `book.write` call that writes any carried."""
    made: list[int] = []
    write = book.write

    async def counted(puts: Sequence[Any] = (), tombstones: Sequence[Any] = (), **kw: Any) -> None:
        if puts or tombstones:
            made.append(len(puts) + len(tombstones))
        await write(puts, tombstones, **kw)

    monkeypatch.setattr(book, "write", counted)
    return made


def remembered(rt: Runtime, session_id: str) -> list[str]:
    entries = rt.store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    return sorted(e.text for e in entries)


def everything_said(turns: int) -> list[str]:
    return sorted([f"question {n}" for n in range(turns)] + [f"answer {n}" for n in range(turns)])


async def test_turns_that_wait_for_their_sessions_job_make_one_book_write(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More turns than `memory_batch_turns` queued before the session's job begins: the
    job takes them all, one write of every entry, not a job and a write per eight."""
    rt = runtime(settings, sqlite_store)
    session_id = stored_conversation(rt, TURNS)
    writes = counted_writes(rt.memory_book, monkeypatch)
    for item in pending_turns(rt):
        queue(rt, item)
    await rt.background.drain()
    assert writes == [2 * TURNS]
    assert remembered(rt, session_id) == everything_said(TURNS)
    assert pending_turns(rt) == []  # the mark moved past them all


async def test_past_the_bound_every_turns_work_is_done_from_the_store_once(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Over the queue's bound, a turn's texts are not kept: its session waits as a key, and
    the job re-reads the turns from the store. Every turn is remembered, each once."""
    rt = runtime(settings, sqlite_store)
    rt.background.max_batched = 3
    session_id = stored_conversation(rt, TURNS)
    for item in pending_turns(rt):
        queue(rt, item)
    assert (rt.background.batched, rt.background.spilled) == (3, TURNS - 3)
    await rt.background.drain()
    assert remembered(rt, session_id) == everything_said(TURNS)
    assert pending_turns(rt) == []
    assert rt.background.pending == 0


async def test_past_the_byte_bound_long_turns_wait_as_their_session_only(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Few turns, long texts: the queue's byte bound, not its count, keeps their texts out
    of memory (the session waits as a key), and every turn is still remembered once."""
    rt = runtime(settings, sqlite_store)
    session_id = stored_conversation(rt, TURNS)
    items = pending_turns(rt)
    rt.background.max_batched_bytes = sum(held_bytes(item) for item in items[:3])
    for item in items:
        queue(rt, item)
    assert (rt.background.batched, rt.background.spilled) == (3, TURNS - 3)
    assert rt.background.batched_bytes <= rt.background.max_batched_bytes
    await rt.background.drain()
    assert remembered(rt, session_id) == everything_said(TURNS)
    assert rt.background.batched_bytes == 0


def test_a_turn_holds_its_texts_bytes_and_a_reread_none() -> None:
    item = TurnInput("s", "ns", None, user_text="ж" * 1_000, assistant_text="a" * 1_000)
    assert held_bytes(item) >= 3_000  # two bytes a character for the first, one for the other
    assert held_bytes(Reread("s")) == 0


async def test_a_turn_whose_item_comes_after_a_later_turns_job_is_still_remembered(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """With `--workers`, a session's turns are spread over processes: one process's job
    moves the session's mark past a turn another process has yet to remember. The mark
    is no reason to skip it; only this process's own re-read of the store is."""
    rt = runtime(settings, sqlite_store)
    session_id = stored_conversation(rt, 2)
    first, second = pending_turns(rt)
    queue(rt, second)
    await rt.background.drain()  # the mark is past both turns now
    queue(rt, first)
    await rt.background.drain()
    assert remembered(rt, session_id) == ["answer 0", "answer 1", "question 0", "question 1"]


async def test_under_workers_a_later_turn_done_first_leaves_the_earlier_one_to_a_restart(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """With `--workers`, one process may remember a session's later turn while another
    still works on an earlier one. Should that other process crash, a restart must find
    the earlier turn, and only it: the mark stops before it, the later one is kept done."""
    rt = Runtime(
        settings.model_copy(
            update={"memory_extract_facts": False, "memory_batch_quiet_seconds": 60, "workers": 2}
        ),
        sqlite_store,
    )
    session_id = stored_conversation(rt, 3)
    first, second, third = pending_turns(rt)
    queue(rt, third)  # this process's turn; the others are another process's, still at work
    await rt.background.drain()
    assert [t.user_text for t in pending_turns(rt)] == ["question 0", "question 1"]
    assert sqlite_store.get_state(session_id)[marks.DONE] == str(third.user_position)

    queue(rt, first)
    await rt.background.drain()
    assert [t.user_text for t in pending_turns(rt)] == ["question 1"]
    queue(rt, second)
    await rt.background.drain()
    assert pending_turns(rt) == []
    state = sqlite_store.get_state(session_id)
    assert state[marks.MARK] == str(third.user_position + 1)  # past every turn, none kept
    assert marks.DONE not in state
