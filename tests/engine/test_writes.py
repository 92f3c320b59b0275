"""The request path's write queue as the event loop sees it (`engine.writes`): a turn
waits for its session's last queued write before it reads, within a bound."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pytest

from memlane.engine.writes import Writes
from memlane.store import StoreError
from memlane.store.sqlite import SQLiteStore

ONE: tuple[str, str] = ("", "session-one")
TWO: tuple[str, str] = ("", "session-two")


@pytest.fixture
async def writes(sqlite_store: SQLiteStore) -> AsyncIterator[Writes]:
    queue = Writes(sqlite_store, limit=10)
    yield queue
    queue.close(timeout=10)


def finished_at_once(coro: Coroutine[Any, Any, bool]) -> bool:
    """The coroutine's result when it returns without waiting for anything."""
    with pytest.raises(StopIteration) as returned:
        coro.send(None)
    result: bool = returned.value.value
    return result


def stuck(writes: Writes, session: tuple[str, str] | None) -> tuple[threading.Event, Any]:
    """A write of `session` that runs until the returned event is set, and its future."""
    started, go = threading.Event(), threading.Event()

    def held() -> str:
        started.set()
        assert go.wait(10)
        return "written"

    future = writes.queue(session, held)
    assert started.wait(10)
    return go, future


async def test_settled_returns_at_once_with_nothing_queued(writes: Writes) -> None:
    assert finished_at_once(writes.settled(ONE))
    assert finished_at_once(writes.settled())


async def test_settled_returns_at_once_once_the_sessions_writes_are_done(
    writes: Writes, sqlite_store: SQLiteStore
) -> None:
    made = writes.queue(ONE, lambda: sqlite_store.ensure_session("one").id)
    made_id = await asyncio.wait_for(made, 10)
    found = sqlite_store.find_session("one")
    assert found is not None
    assert found.id == made_id
    assert finished_at_once(writes.settled(ONE))


def held_answer(writes: Writes, order: list[str]) -> threading.Event:
    """An answer its client resends (`read_next=False`), queued for session ONE and held
    in the writer until the returned event is set."""
    started, go = threading.Event(), threading.Event()

    def answer() -> None:
        started.set()
        assert go.wait(10)
        order.append("answer")

    writes.queue(ONE, answer, read_next=False)
    assert started.wait(10)
    return go


async def test_a_turn_reads_beside_the_answer_it_resends_when_nothing_else_waits(
    writes: Writes,
) -> None:
    """The session's next turn reads at once, yet what it queues is written after the
    answer; a write it reads is waited for as ever, and so is the answer by a reader of
    the whole store."""
    order: list[str] = []
    go = held_answer(writes, order)
    assert finished_at_once(writes.before_reading(ONE))
    everything = asyncio.ensure_future(writes.settled())
    after = writes.queue(ONE, lambda: order.append("next turn"))
    waiting = asyncio.ensure_future(writes.before_reading(ONE))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert not everything.done()

    go.set()
    assert await asyncio.wait_for(waiting, 10)
    assert await asyncio.wait_for(everything, 10)
    await asyncio.wait_for(after, 10)
    assert order == ["answer", "next turn"]


async def test_a_turn_waits_for_the_answer_it_resends_while_other_writes_wait(
    writes: Writes,
) -> None:
    """With other sessions' writes queued too (a busy proxy) the turn waits for its
    answer's write: that wait keeps busy clients in step with the writer."""
    order: list[str] = []
    go = held_answer(writes, order)
    other = writes.queue(TWO, lambda: order.append("another session"))
    waiting = asyncio.ensure_future(writes.before_reading(ONE))
    await asyncio.sleep(0.05)
    assert not waiting.done()

    go.set()
    assert await asyncio.wait_for(waiting, 10)
    await asyncio.wait_for(other, 10)
    assert order == ["answer", "another session"]
    assert finished_at_once(writes.before_reading(ONE))


async def test_settled_waits_for_the_sessions_last_write(
    writes: Writes, sqlite_store: SQLiteStore
) -> None:
    go, first = stuck(writes, ONE)
    last = writes.queue(ONE, lambda: sqlite_store.ensure_session("one"))
    waiting = asyncio.ensure_future(writes.settled(ONE))
    await asyncio.sleep(0.05)
    assert not waiting.done()

    go.set()
    assert await asyncio.wait_for(waiting, 10)
    assert first.done()
    assert last.done()
    assert sqlite_store.find_session("one") is not None  # committed by then


async def test_settled_gives_up_after_its_limit_when_a_write_is_stuck(
    writes: Writes,
) -> None:
    writes.limit = 0.05
    go, held = stuck(writes, ONE)
    assert await writes.settled(ONE) is False
    assert not held.done()  # the write itself goes on
    go.set()
    assert await asyncio.wait_for(held, 10) == "written"


async def test_another_sessions_stuck_write_holds_no_one_else(writes: Writes) -> None:
    go, _ = stuck(writes, ONE)
    assert finished_at_once(writes.settled(TWO))
    go.set()


async def test_settled_for_every_session_waits_for_each_of_them(
    writes: Writes, sqlite_store: SQLiteStore
) -> None:
    go, one = stuck(writes, ONE)
    two = writes.queue(TWO, lambda: sqlite_store.ensure_session("two"))
    anonymous = writes.queue(None, lambda: sqlite_store.ensure_session("three"))
    waiting = asyncio.ensure_future(writes.settled())
    await asyncio.sleep(0.05)
    assert not waiting.done()

    go.set()
    assert await asyncio.wait_for(waiting, 10)
    assert all(f.done() for f in (one, two, anonymous))
    assert sqlite_store.find_session("two") is not None
    assert sqlite_store.find_session("three") is not None


async def test_a_writes_result_and_error_arrive_in_its_future(writes: Writes) -> None:
    def refused() -> None:
        raise StoreError("disk I/O error")

    assert await asyncio.wait_for(writes.queue(ONE, lambda: 42), 10) == 42
    with pytest.raises(StoreError, match="disk I/O error"):
        await asyncio.wait_for(writes.queue(ONE, refused), 10)
    assert await writes.settled(ONE)  # a failed write is settled too


async def test_failed_runs_in_the_writer_only_for_a_write_that_did_not_commit(
    writes: Writes,
) -> None:
    called_in: list[str] = []

    def refused() -> None:
        raise StoreError("disk I/O error")

    def failed() -> None:
        called_in.append(threading.current_thread().name)

    ok = writes.queue(ONE, lambda: None, failed=failed)
    bad = writes.queue(ONE, refused, failed=failed)
    await asyncio.wait([ok, bad], timeout=10)
    assert called_in == ["memlane-writer"]


async def test_failed_runs_before_the_next_batch_runs(writes: Writes) -> None:
    """A write queued behind one that failed reads what `failed` says (the answer of a turn
    whose messages were not stored is not stored either)."""
    failed_first = threading.Event()
    started, go = threading.Event(), threading.Event()
    seen: list[bool] = []

    def refused() -> None:
        started.set()
        assert go.wait(10)
        raise StoreError("disk I/O error")

    writes.queue(ONE, refused, failed=failed_first.set)
    assert started.wait(10)
    behind = writes.queue(ONE, lambda: seen.append(failed_first.is_set()))  # the next batch
    go.set()
    await asyncio.wait_for(behind, 10)
    assert writes.writer.batches == 2
    assert seen == [True]


async def test_failed_runs_before_the_next_write_of_the_same_batch_runs(writes: Writes) -> None:
    failed_first = threading.Event()
    seen: list[bool] = []

    def refused() -> None:
        raise StoreError("disk I/O error")

    go, _ = stuck(writes, TWO)  # the two below go into the writer's next batch together
    writes.queue(ONE, refused, failed=failed_first.set)
    behind = writes.queue(ONE, lambda: seen.append(failed_first.is_set()))
    go.set()
    await asyncio.wait_for(behind, 10)
    assert writes.writer.batches == 2
    assert seen == [True]


async def test_close_commits_what_is_queued(writes: Writes, sqlite_store: SQLiteStore) -> None:
    go, _ = stuck(writes, ONE)
    queued = [writes.queue(TWO, lambda n=n: sqlite_store.ensure_session(f"k{n}")) for n in range(5)]
    go.set()
    assert await asyncio.to_thread(writes.close, 10)
    await asyncio.wait(queued, timeout=10)
    assert all(f.done() and f.exception() is None for f in queued)
    assert all(sqlite_store.find_session(f"k{n}") is not None for n in range(5))
