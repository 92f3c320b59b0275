"""A turn's writes, queued to the store's writer in the order the turn makes them
(`engine.storing`), committed in batches with every other request's (`engine.writes`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from memlane.config import Settings
from memlane.engine import failopen, pipeline, storing, threads
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer, Turn
from memlane.store import StoreError
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message
from tests.support.stores import count_commits


@pytest.fixture
async def rt(settings: Settings, sqlite_store: SQLiteStore) -> AsyncIterator[Runtime]:
    runtime = Runtime(settings, sqlite_store)
    yield runtime
    runtime.writes.close(timeout=10)


def _turn() -> Turn:
    return Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[])


async def test_a_turns_writes_run_in_the_order_it_queued_them(rt: Runtime) -> None:
    turn = _turn()
    ran: list[str] = []
    for name in ("messages", "scaffold", "plan", "answer"):
        storing.queue(rt, turn, lambda name=name: ran.append(name))  # type: ignore[misc]
    last = turn.storing
    assert last is not None
    await asyncio.wait_for(last, 10)  # the last one queued: the others ran before it
    assert ran == ["messages", "scaffold", "plan", "answer"]


async def test_the_turns_last_write_is_the_one_the_next_turn_waits_for(rt: Runtime) -> None:
    turn = _turn()
    go = threading.Event()
    storing.queue(rt, turn, lambda: None)
    held = storing.queue(rt, turn, lambda: go.wait(10))
    assert turn.storing is held
    waiting = asyncio.ensure_future(rt.writes.settled(turn.session_of))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    go.set()
    assert await asyncio.wait_for(waiting, 10)
    assert held.done()


async def test_a_write_of_the_messages_that_fails_marks_the_turn_lost(rt: Runtime) -> None:
    turn = _turn()

    def refused() -> None:
        raise StoreError("disk I/O error")

    failed = storing.queue(rt, turn, refused, messages=True)
    with pytest.raises(StoreError, match="disk I/O error"):
        await asyncio.wait_for(failed, 10)
    assert turn.lost


async def test_a_write_queued_behind_messages_that_failed_in_its_batch_sees_the_turn_lost(
    rt: Runtime,
) -> None:
    """The answer's write reads `Turn.lost` when it runs: queued in the same batch as
    messages that failed, it must see them failed (or it stores an answer to nothing)."""
    turn = _turn()

    def refused() -> None:
        raise StoreError("disk I/O error")

    seen_lost: list[bool] = []
    go = await _writer_held(rt)
    storing.queue(rt, turn, refused, messages=True)
    behind = storing.queue(rt, turn, lambda: seen_lost.append(turn.lost))
    go.set()
    await asyncio.wait_for(behind, 10)
    assert turn.lost
    assert seen_lost == [True]


async def test_another_write_that_fails_leaves_the_turn_as_it_was(rt: Runtime) -> None:
    turn = _turn()

    def refused() -> None:
        raise StoreError("constraint failed")

    failed = storing.queue(rt, turn, refused)
    with pytest.raises(StoreError, match="constraint failed"):
        await asyncio.wait_for(failed, 10)
    assert not turn.lost


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


async def _writer_held(rt: Runtime) -> threading.Event:
    """The writer busy committing another session's write until the returned event is set:
    everything queued meanwhile goes into its next batch."""
    started, go = threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        assert go.wait(10)

    rt.writes.queue(("", "someone-else"), held)
    assert await asyncio.to_thread(started.wait, 10)
    return go


async def _prepared_behind_a_held_batch(rt: Runtime, turn: Turn) -> None:
    """`turn` prepared while the writer commits another batch."""
    go = await _writer_held(rt)
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    go.set()
    await asyncio.wait_for(rt.writes.settled(), 10)


async def test_a_new_sessions_row_messages_state_and_first_plan_are_one_batch(
    rt: Runtime, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = _new_session_turn("one-batch")
    commits = count_commits(sqlite_store, monkeypatch)
    assert sqlite_store.find_session("one-batch") is None
    await _prepared_behind_a_held_batch(rt, turn)

    assert rt.writes.writer.batches == 2  # the held one, then all of the turn's
    assert len(commits) == 2  # nothing of the turn was committed outside the writer
    found = sqlite_store.find_session_state("one-batch")
    assert found is not None
    session, state = found
    assert turn.session is not None
    assert session.id == turn.session.id
    texts = [m.message.text for m in sqlite_store.list_messages(session.id)]
    assert texts[:2] == ["You are a coding agent.", "start the ledger"]
    assert "<todo>\n1. ship it\n</todo>" in texts[2]  # the state block it was sent with
    # the session's memory mark too: its turns' memory work resumes after a stop
    assert set(state) == {"state_blocks", "governance.plan", "memory.remembered"}


async def test_messages_that_fail_to_store_leave_the_new_sessions_row_and_its_failure_record(
    rt: Runtime, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row, the messages and the plan share one batch, but messages that fail undo
    only themselves: the row stays, and with it the record of what failed."""

    def refused(*args: object, **kwargs: object) -> None:
        raise StoreError("disk I/O error")

    monkeypatch.setattr(sqlite_store, "sync_messages", refused)
    turn = _new_session_turn("refused")
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    await pipeline.stored(rt, turn)
    await asyncio.wait_for(rt.writes.settled(), 10)  # the failure's record, queued behind

    assert turn.lost
    session = sqlite_store.find_session("refused")
    assert session is not None
    assert sqlite_store.list_messages(session.id) == []
    (event,) = sqlite_store.list_events(session.id, kind=failopen.EVENT)
    assert event.payload["stage"] == "store"
    assert "disk I/O error" in event.payload["error"]


async def test_a_scaffold_write_that_fails_undoes_itself_and_the_rest_of_the_turn_is_kept(
    rt: Runtime, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
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


async def test_a_new_sessions_answer_is_not_stored_when_its_row_could_not_be_written(
    rt: Runtime, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is written by the turn's messages' write; when that fails, the answer's
    write behind it in the same batch must not store an answer to nothing."""
    ensure = sqlite_store.ensure_session
    refusals = iter([StoreError("database or disk is full")])

    def once_refused(*args: object, **kwargs: object) -> object:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        return ensure(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "ensure_session", once_refused)
    turn = Turn(
        key="no-row", namespace="no-row", model="m", wire="chat", messages=[Message("user", "hi")]
    )
    go = await _writer_held(rt)
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, turn)
    await pipeline.finish(rt, turn, Answer([Message("assistant", "hello")]))
    go.set()
    await asyncio.wait_for(rt.writes.settled(), 10)

    assert turn.lost
    session = sqlite_store.find_session("no-row")
    stored = [] if session is None else sqlite_store.list_messages(session.id)
    assert [m.message.text for m in stored] == []  # the client's next request resends both
