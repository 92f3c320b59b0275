"""The book's group of waiting writes: files flushed together, the index a few rows a
store transaction."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from memlane.engine import threads
from memlane.engine.memory.book import MemoryBook, writes
from memlane.engine.memory.entries import new_fact
from memlane.engine.turnlog import MEMORIES_ADDED, MEMORIES_UPDATED, TURNS_REMEMBERED, today
from memlane.files.memory_files import new_id
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact
from tests.engine.memory.conftest import agree
from tests.support.stores import count_commits


def entry(text: str) -> Fact:
    return new_fact(scope="conv:c", conversation_id="c", role="user", text=text, fact_id=new_id())


async def test_a_group_of_entries_is_indexed_a_few_rows_a_store_transaction(
    book: MemoryBook, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background writer waits at the store's write gate while requests write: its
    group's rows and counters go `ROWS_PER_TRANSACTION` a transaction, not one each."""
    old = [entry(f"old {n}") for n in range(2)]
    await book.write(puts=old, new={f.id for f in old})
    commits = count_commits(sqlite_store, monkeypatch)
    monkeypatch.setattr(writes, "ROWS_PER_TRANSACTION", 5)
    puts = [entry(f"new {n}") for n in range(10)]
    await book.write(puts=puts, tombstones=[(f, None) for f in old], new={f.id for f in puts})
    assert len(commits) == 3  # 10 puts, 2 tombstones and the day's counters
    on_disk = agree(book)
    assert sorted(t for t, deleted in on_disk.values() if not deleted) == sorted(
        f"new {n}" for n in range(10)
    )
    assert sqlite_store.daily_counts(since=today())[today()][TURNS_REMEMBERED] == 12


async def test_a_turns_entries_and_the_days_counters_commit_once(
    book: MemoryBook, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's write (its turn entries, a fact it replaces) is one store commit, the
    day's counters with it: each commit also costs the keyword index's catch-up."""
    old = [entry("old")]
    await book.write(puts=old, new={f.id for f in old})
    commits = count_commits(sqlite_store, monkeypatch)
    puts = [entry("user says"), entry("assistant says")]
    await book.write(puts=puts, tombstones=[(old[0], None)], new={f.id for f in puts})
    assert len(commits) == 1
    assert sorted(f.text for f in sqlite_store.list_facts(roles=("user",))) == [
        "assistant says",
        "user says",
    ]
    assert sqlite_store.daily_counts(since=today())[today()][TURNS_REMEMBERED] == 3


async def test_memories_just_minted_are_counted_as_added_without_a_lookup(
    book: MemoryBook, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day's counters tell added memories from updated ones; an id the write minted
    (`new`) cannot be in the store yet, so only the others are looked up."""
    old = new_fact(scope="conv:c", conversation_id="c", role="memory", text="old", fact_id=new_id())
    await book.write(puts=[old], new={old.id})
    looked: list[str] = []
    get_fact = sqlite_store.get_fact

    def counted(fact_id: str) -> object:
        looked.append(fact_id)
        return get_fact(fact_id)

    monkeypatch.setattr(sqlite_store, "get_fact", counted)
    fresh = [
        new_fact(
            scope="conv:c", conversation_id="c", role="memory", text=f"fact {n}", fact_id=new_id()
        )
        for n in range(3)
    ]
    changed = new_fact(
        scope="conv:c", conversation_id="c", role="memory", text="new", fact_id=old.id
    )
    await book.write(puts=[*fresh, changed], new={f.id for f in fresh})
    assert looked == [old.id]
    counts = sqlite_store.daily_counts(since=today())[today()]
    assert counts[MEMORIES_ADDED] == 4  # the first write's one, then three
    assert counts[MEMORIES_UPDATED] == 1


async def test_the_writer_lets_requests_go_first_before_it_takes_the_books_lock(
    book: MemoryBook,
) -> None:
    """Background work waits for the requests in hand; the writer does so before it takes
    the book's lock, which every session's batch waits for, never while holding it."""
    with threads.TRAFFIC.serving():  # a request in memlane's hands
        writing = asyncio.get_running_loop().create_task(
            book.write(puts=[entry("later")]), context=threads.background_context()
        )
        await asyncio.sleep(0.05)
        assert not book.lock.locked()
    await writing  # the request went: the write goes on
    assert [f.text for f in book.rt.store.list_facts(roles=("user",))] == ["later"]


async def test_the_writer_never_queues_behind_the_background_pools_other_steps(
    book: MemoryBook,
) -> None:
    """Every background step shares a small pool; the book's writer, which every session's
    batch waits for, has a thread of its own: busy pool threads do not hold it back."""
    release = threading.Event()

    async def blocked() -> None:
        await threads.to_thread(release.wait, 30)

    loop = asyncio.get_running_loop()
    busy = [
        loop.create_task(blocked(), context=threads.background_context())
        for _ in range(threads.BACKGROUND_THREADS)
    ]
    try:
        await asyncio.sleep(0.05)  # every pool thread waits on `release`
        writing = loop.create_task(
            book.write(puts=[entry("written")]), context=threads.background_context()
        )
        await asyncio.wait_for(writing, 20)
    finally:
        release.set()
        await asyncio.gather(*busy)
    assert [f.text for f in book.rt.store.list_facts(roles=("user",))] == ["written"]


async def test_writes_waiting_together_take_the_books_lock_once_per_group(
    book: MemoryBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each caller waits for its own write, not for the lock: many sessions' batches
    queued on it woke one by one through a busy event loop, seconds a group."""
    taken: list[int] = []
    writing = book.writing

    def counted() -> contextlib.AbstractAsyncContextManager[None]:
        taken.append(1)
        return writing()

    monkeypatch.setattr(book, "writing", counted)
    await asyncio.gather(*(book.write(puts=[entry(f"session {n}")]) for n in range(50)))
    assert len(taken) == 1
    assert len(book.rt.store.list_facts(roles=("user",))) == 50
