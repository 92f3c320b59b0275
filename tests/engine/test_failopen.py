"""The fail-open boundary: a stage that fails or overruns is skipped, logged and recorded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.config import Settings
from memlane.engine import storing
from memlane.engine.failopen import EVENT, best_effort
from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import made_session, write_made
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def stored_turn(rt: Runtime) -> Turn:
    session = rt.store.ensure_session("k")
    return Turn("k", "k", "m", "chat", [Message("user", "hi")], session=session)


async def test_a_failing_stage_gives_its_fallback_and_is_recorded(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(settings, sqlite_store)
    turn = stored_turn(rt)

    async def broken() -> str:
        raise RuntimeError("index is corrupt")

    assert await best_effort(rt, turn, "recall", broken(), "fallback") == "fallback"
    assert turn.session is not None
    assert await rt.writes.settled()  # the record is queued to the store's writer
    events = sqlite_store.list_events(turn.session.id, kind=EVENT)
    assert [e.payload["stage"] for e in events] == ["recall"]
    assert events[0].payload["error"] == "index is corrupt"
    failures = rt.activity.snapshot()["failures"]
    assert failures["recall"]["count"] == 1
    assert "RuntimeError" in failures["recall"]["last"]


async def test_an_overrun_is_cut_at_its_deadline(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(settings, sqlite_store)
    turn = stored_turn(rt)
    started = asyncio.get_running_loop().time()
    result = await best_effort(rt, turn, "recall", asyncio.sleep(5, "late"), "none", deadline_ms=20)
    assert result == "none"
    assert asyncio.get_running_loop().time() - started < 2
    assert turn.session is not None
    assert await rt.writes.settled()
    (event,) = sqlite_store.list_events(turn.session.id, kind=EVENT)
    assert "deadline of 20 ms" in event.payload["error"]


async def test_a_preflight_refusal_is_not_swallowed(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(settings, sqlite_store)

    async def too_big() -> str:
        raise ContextOverflow(model="m", tokens=9000, limit=8000, window=8192)

    with pytest.raises(ContextOverflow):
        await best_effort(rt, None, "governance", too_big(), "forwarded anyway")


async def test_a_new_sessions_failure_is_kept_once_its_row_is_written(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Its row is written behind the request (`engine.sessions.ahead`): the event is queued
    behind it, where adding it at once would break the row's foreign key and be lost."""
    rt = Runtime(settings, sqlite_store)
    made = made_session("new", "new", "")
    turn = Turn("new", "new", "m", "chat", [Message("user", "hi")], session=made, made_ahead=made)
    release = threading.Event()

    def row() -> None:
        release.wait(10)
        write_made(sqlite_store, made)

    storing.queue(rt, turn, row, messages=True)

    async def broken() -> str:
        raise RuntimeError("index is corrupt")

    assert await best_effort(rt, turn, "recall", broken(), "fallback") == "fallback"
    assert rt.activity.snapshot()["failures"]["recall"]["count"] == 1  # counted at once
    assert sqlite_store.get_session(made.id) is None  # the request did not wait for the row

    release.set()
    assert await rt.writes.settled(turn.session_of)
    (event,) = sqlite_store.list_events(made.id, kind=EVENT)
    assert event.payload == {"stage": "recall", "error": "index is corrupt", "type": "RuntimeError"}
