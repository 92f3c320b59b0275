"""Writes queued behind a turn's own store (`engine.storing`)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.config import Settings
from memlane.engine import failopen, pipeline, threads
from memlane.engine.runtime import Runtime
from memlane.engine.storing import after_storing
from memlane.engine.turn import Turn
from memlane.store import StoreError
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def _turn() -> Turn:
    return Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[])


def _storing_with_a_write(done: list[str]) -> tuple[Turn, asyncio.Future[None]]:
    """A turn whose messages are being stored, with one write queued behind them."""
    turn = _turn()
    store: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    turn.storing = store
    after_storing(turn, lambda: done.append("first"))
    return turn, store


async def test_queued_writes_run_in_order_once_the_store_before_them_is_done() -> None:
    done: list[str] = []
    turn, store = _storing_with_a_write(done)
    after_storing(turn, lambda: done.append("second"))
    await asyncio.sleep(0.05)
    assert done == []
    store.set_result(None)
    await turn.storing
    assert done == ["first", "second"]


async def test_a_write_behind_a_cancelled_store_is_not_run_and_the_turn_sees_it_cancelled() -> None:
    done: list[str] = []
    turn, store = _storing_with_a_write(done)
    store.cancel()
    queued = turn.storing
    assert queued is not None
    await asyncio.wait([queued])
    assert queued.cancelled()
    assert done == []


def test_a_write_needs_a_store_to_queue_behind() -> None:
    with pytest.raises(ValueError, match="no store under way"):
        after_storing(_turn(), lambda: None)


async def test_the_next_turn_reads_once_the_writes_queued_behind_the_turn_are_stored(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Governance's plan and anchor are queued behind the turn's messages: the session's
    next turn reads them, so it waits for them too (`TurnOrder.incoming`)."""
    rt = Runtime(settings, sqlite_store)
    go = threading.Event()
    turn = Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[Message("user", "hi")])
    await pipeline.prepare(rt, turn)
    after_storing(turn, lambda: go.wait(10) and None)
    await asyncio.sleep(0.05)  # the messages are stored by now; the queued write waits

    incoming = rt.turn_order.incoming("s1")
    assert incoming is not None
    waiting = asyncio.ensure_future(incoming)
    await asyncio.sleep(0.05)
    assert not waiting.done()
    go.set()
    await asyncio.wait_for(waiting, 5)
    assert rt.turn_order.incoming("s1") is None


def _commits(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the store's commits: each takes the write lock and catches the indexes up."""
    made: list[int] = []
    committed = store._committed

    def counted() -> None:
        made.append(1)
        committed()

    monkeypatch.setattr(store, "_committed", counted)
    return made


def _new_session_turn(key: str, todo: str = "1. ship it") -> Turn:
    messages = [Message("system", "You are a coding agent."), Message("user", "start the ledger")]
    return Turn(
        key=key,
        namespace=key,
        model="gpt-4o",
        wire="chat",
        messages=messages,
        agentic=True,
        flags={"todo": todo},
    )


async def test_a_new_sessions_row_messages_state_and_first_plan_are_one_commit(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(settings, sqlite_store)
    turn = _new_session_turn("one-commit")
    commits = _commits(sqlite_store, monkeypatch)
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)

    assert len(commits) == 1
    found = sqlite_store.find_session_state("one-commit")
    assert found is not None
    session, state = found
    texts = [m.message.text for m in sqlite_store.list_messages(session.id)]
    assert texts[:2] == ["You are a coding agent.", "start the ledger"]
    assert "<todo>\n1. ship it\n</todo>" in texts[2]  # the state block it was sent with
    # the session's memory mark too: its turns' memory work resumes after a stop
    assert set(state) == {"state_blocks", "governance.plan", "memory.remembered"}


async def test_messages_that_fail_to_store_leave_the_new_sessions_row_and_its_failure_record(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row, the messages and the plan share one commit, but messages that fail undo
    only themselves: the row stays, and with it the record of what failed."""
    rt = Runtime(settings, sqlite_store)

    def refused(*args: object, **kwargs: object) -> None:
        raise StoreError("disk I/O error")

    monkeypatch.setattr(sqlite_store, "sync_messages", refused)
    turn = _new_session_turn("refused")
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)
    assert turn.storing is not None
    await turn.storing  # the failure's record, queued behind the store that failed

    assert turn.lost
    session = sqlite_store.find_session("refused")
    assert session is not None
    assert sqlite_store.list_messages(session.id) == []
    (event,) = sqlite_store.list_events(session.id, kind=failopen.EVENT)
    assert event.payload["stage"] == "store"
    assert "disk I/O error" in event.payload["error"]


async def test_a_scaffold_write_that_fails_undoes_itself_and_the_rest_of_the_turn_is_kept(
    settings: Settings, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(settings, sqlite_store)
    set_state = sqlite_store.set_state
    calls: list[str] = []

    def half_then_fail(session_id: str, key: str, value: str | None) -> None:
        calls.append(key)
        if key == "state_blocks":
            set_state(session_id, key, value)  # written, then undone with its savepoint
            raise StoreError("constraint failed")
        set_state(session_id, key, value)

    monkeypatch.setattr(sqlite_store, "set_state", half_then_fail)
    turn = _new_session_turn("half")
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)

    assert not turn.lost
    assert "state_blocks" in calls
    found = sqlite_store.find_session_state("half")
    assert found is not None
    session, state = found
    assert "state_blocks" not in state
    assert "governance.plan" in state  # queued behind, still kept
    assert len(sqlite_store.list_messages(session.id)) >= 2
    assert "scaffold" in rt.activity.snapshot()["failures"]
