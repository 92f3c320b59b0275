"""A session whose memory work failed: its turns are neither skipped by a later batch nor
left until the next start."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.memory import failures, ingest, marks
from memlane.engine.memory.resume import pending_turns
from memlane.engine.runtime import Runtime
from memlane.store import NewMessage, StoreError
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def runtime(settings: Settings, store: SQLiteStore) -> Runtime:
    """Turn entries only (no extraction: no model), batches run at once."""
    update = {"memory_extract_facts": False, "memory_batch_quiet_seconds": 0}
    return Runtime(settings.model_copy(update=update), store)


def two_turns(rt: Runtime) -> str:
    session = rt.store.ensure_session("k", namespace="repo")
    messages = [
        Message("user", "first"),
        Message("assistant", "one"),
        Message("user", "second"),
        Message("assistant", "two"),
    ]
    rt.store.append_messages(session.id, [NewMessage(m, 1) for m in messages])
    rt.store.set_state(session.id, marks.MARK, "0")
    return session.id


def refuse_writes(rt: Runtime, monkeypatch: pytest.MonkeyPatch, times: int) -> None:
    """The memory book's next `times` writes fail as a store refusing them would."""
    write = rt.memory_book.write
    left = [times]

    async def refused(puts: Sequence[Any] = (), tombstones: Sequence[Any] = (), **kw: Any) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise StoreError("disk I/O error")
        await write(puts, tombstones, **kw)

    monkeypatch.setattr(rt.memory_book, "write", refused)


def queued_failing(rt: Runtime, monkeypatch: pytest.MonkeyPatch, *, times: int) -> str:
    """A session of two answered turns, queued for memory work whose first `times` book
    writes fail; its id."""
    session_id = two_turns(rt)
    refuse_writes(rt, monkeypatch, times=times)
    for item in pending_turns(rt):
        ingest.queue(rt, item)
    return session_id


def remembered(rt: Runtime, session_id: str) -> list[str]:
    entries = rt.store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    return sorted(e.text for e in entries)


async def test_a_later_batch_does_not_move_the_mark_past_a_failed_one(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process taking every turn in order moves the mark past a batch's last turn; after
    a failed batch it would skip the failed turns for good, even at the next start."""
    monkeypatch.setattr(failures, "RETRY_SECONDS", ())  # no retry: the next start's work
    rt = runtime(settings, sqlite_store)
    assert rt.serves_alone
    session_id = two_turns(rt)
    first, second = pending_turns(rt)
    refuse_writes(rt, monkeypatch, times=1)

    with pytest.raises(StoreError):
        await ingest._recorded(rt, [first])
    await ingest._recorded(rt, [second])

    assert remembered(rt, session_id) == ["second", "two"]
    assert [turn.user_text for turn in pending_turns(rt)] == ["first"]  # still to do
    await ingest._recorded(rt, pending_turns(rt))  # what the next start does
    assert remembered(rt, session_id) == ["first", "one", "second", "two"]
    assert pending_turns(rt) == []
    assert sqlite_store.get_state(session_id)[marks.MARK] == "3"  # past the second user message


async def test_a_failed_batch_is_tried_again_while_the_process_runs(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(failures, "RETRY_SECONDS", (0.05, 0.05))
    rt = runtime(settings, sqlite_store)
    session_id = queued_failing(rt, monkeypatch, times=2)  # the first try and the first retry

    for _ in range(200):
        await rt.background.drain()
        if not pending_turns(rt):
            break
        await asyncio.sleep(0.02)

    assert remembered(rt, session_id) == ["first", "one", "second", "two"]
    assert sqlite_store.get_state(session_id)[marks.MARK] == "3"  # past the second user message


async def test_past_the_last_pause_the_turns_wait_for_the_next_start(
    settings: Settings,
    sqlite_store: SQLiteStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(failures, "RETRY_SECONDS", (0.01,))
    rt = runtime(settings, sqlite_store)
    session_id = queued_failing(rt, monkeypatch, times=2)

    for _ in range(20):
        await rt.background.drain()
        await asyncio.sleep(0.02)

    assert remembered(rt, session_id) == []
    assert len(pending_turns(rt)) == 2
    assert "failed again: left to the next start" in caplog.text


async def test_shutdown_cancels_a_planned_retry(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(failures, "RETRY_SECONDS", (0.05,))
    rt = runtime(settings, sqlite_store)
    session_id = queued_failing(rt, monkeypatch, times=1)
    await rt.background.drain()

    await rt.background.cancel_all()
    await asyncio.sleep(0.1)

    assert remembered(rt, session_id) == []  # the next start resumes them
