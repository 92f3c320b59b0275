"""One writer thread per store commits queued writes in batches (`store.group_commit`),
on each backend (`store`: SQLite in a temporary folder, then PostgreSQL)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from memlane.store import Store, StoreError, group_commit
from memlane.store.group_commit import MAX_BATCH, GroupCommit
from memlane.store.postgres import PostgresStore
from memlane.store.postgres.advisory import BATCH_LOCK, LOCK_CLASS
from memlane.store.sql import SqlStore


class Outcomes:
    """Each write's outcome as its `done` callback got it, in the order they came."""

    def __init__(self) -> None:
        self.got: list[tuple[str, Any, BaseException | None]] = []
        self._changed = threading.Condition()

    def done(self, name: str) -> Callable[[Any, BaseException | None], None]:
        def record(value: Any, error: BaseException | None) -> None:
            with self._changed:
                self.got.append((name, value, error))
                self._changed.notify_all()

        return record

    def wait(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.got) >= count, 10), self.got

    def of(self, name: str) -> tuple[Any, BaseException | None]:
        (outcome,) = [(value, error) for got, value, error in self.got if got == name]
        return outcome


@pytest.fixture
def writer(store: Store) -> Iterator[GroupCommit]:
    with _sql(store)._writing() as db:
        # a row whose parent must exist when the transaction commits, not before: a write
        # can leave its batch unable to commit
        db.run(
            "CREATE TABLE probe (id INTEGER PRIMARY KEY, parent INTEGER "
            "REFERENCES probe (id) DEFERRABLE INITIALLY DEFERRED)"
        )
    group = GroupCommit(store, name="memlane-writer-test")
    yield group
    group.close(timeout=10)


def _sql(store: Store) -> SqlStore[Any]:
    assert isinstance(store, SqlStore)
    return store


def _insert(store: Store, id: int, parent: int | None = None) -> Callable[[], int]:
    def write() -> int:
        with _sql(store)._writing() as db:
            db.run("INSERT INTO probe (id, parent) VALUES (?, ?)", id, parent)
        return id

    return write


def _stored(store: Store) -> list[int]:
    with _sql(store)._writing() as db:
        return [row["id"] for row in db.all("SELECT id FROM probe ORDER BY id")]


def _held(writer: GroupCommit, outcomes: Outcomes) -> threading.Event:
    """The writer busy with a first batch until the returned event is set."""
    started, go = threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        assert go.wait(10)

    writer.submit(held, outcomes.done("held"))
    assert started.wait(10)
    return go


def _between(
    store: Store, writer: GroupCommit, outcomes: Outcomes, name: str, write: Callable[[], Any]
) -> None:
    """`write` (its outcome under `name`) between row 1 ("before") and row 3 ("after"),
    the three in one batch, which has committed on return."""
    go = _held(writer, outcomes)
    writer.submit(_insert(store, 1), outcomes.done("before"))
    writer.submit(write, outcomes.done(name))
    writer.submit(_insert(store, 3), outcomes.done("after"))
    go.set()
    outcomes.wait(4)


def test_writes_queued_while_a_batch_commits_go_into_one_next_batch(
    store: Store, writer: GroupCommit
) -> None:
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    for n in range(50):
        writer.submit(_insert(store, n), outcomes.done(f"row {n}"))
    go.set()
    outcomes.wait(51)

    assert writer.batches == 2
    assert _stored(store) == list(range(50))
    assert all(error is None for _, _, error in outcomes.got)
    assert outcomes.of("row 7") == (7, None)


class _Watched(threading.Event):
    """A writer's hurry flag that sets `lingering` when the writer sleeps on it: a batch
    waiting for company, seen with no clock."""

    def __init__(self, lingering: threading.Event) -> None:
        super().__init__()
        self.lingering = lingering

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            self.lingering.set()
        return super().wait(timeout)


def test_a_lingering_write_waits_for_a_hurry_made_after_it_not_for_one_made_before(
    store: Store, writer: GroupCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request hurries its writes when it waits for them. A hurry made while nothing
    lingered (an earlier request's, its writes done) must not start the next request's
    writes beside the rest of its work: they linger until a hurry made after them."""
    monkeypatch.setattr(group_commit, "LINGER_SECONDS", 30.0)
    moved = threading.Event()  # the writer lingers on the write, or commits it
    writer._hurried = _Watched(moved)  # before the writer's first write starts it
    outcomes = Outcomes()
    writer.submit(_insert(store, 1), outcomes.done("earlier"))
    outcomes.wait(1)
    writer.hurry()  # nothing lingers: it hurries nothing to come

    def lingering(value: Any, error: BaseException | None) -> None:
        outcomes.done("lingering")(value, error)
        moved.set()

    writer.submit(_insert(store, 2), lingering, linger=True)
    assert moved.wait(10)
    assert _stored(store) == [1]  # it lingers: the hurry before it did not start it
    writer.hurry()
    outcomes.wait(2)
    assert outcomes.of("lingering") == (2, None)
    assert _stored(store) == [1, 2]


def test_a_hurry_made_before_the_writer_takes_a_lingering_write_still_starts_it(
    store: Store, writer: GroupCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer is busy with an earlier batch when a write is queued and hurried: the
    hurry was made after the write, so the write does not linger once its turn comes."""
    monkeypatch.setattr(group_commit, "LINGER_SECONDS", 30.0)
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    writer.submit(_insert(store, 1), outcomes.done("lingering"), linger=True)
    writer.hurry()
    go.set()
    outcomes.wait(2)  # well before the linger's 30 s

    assert outcomes.of("lingering") == (1, None)


def test_a_batch_is_bounded(store: Store, writer: GroupCommit) -> None:
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    for n in range(MAX_BATCH + 1):
        writer.submit(_insert(store, n), outcomes.done(f"row {n}"))
    go.set()
    outcomes.wait(MAX_BATCH + 2)
    assert writer.batches == 3
    assert len(_stored(store)) == MAX_BATCH + 1


def test_a_failing_write_undoes_only_itself_and_the_others_commit(
    store: Store, writer: GroupCommit
) -> None:
    outcomes = Outcomes()

    def half_then_fail() -> None:
        _insert(store, 2)()  # written, then undone with the write's savepoint
        raise StoreError("constraint failed")

    _between(store, writer, outcomes, "failing", half_then_fail)

    assert writer.batches == 2  # the three were one batch
    assert _stored(store) == [1, 3]
    value, error = outcomes.of("failing")
    assert value is None
    assert isinstance(error, StoreError)
    assert outcomes.of("before") == (1, None)
    assert outcomes.of("after") == (3, None)


def test_a_commit_that_fails_fails_every_write_of_its_batch(
    store: Store, writer: GroupCommit
) -> None:
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    writer.submit(_insert(store, 1), outcomes.done("before"))
    writer.submit(_insert(store, 2, parent=99), outcomes.done("no parent"))  # fails the commit
    writer.submit(_insert(store, 3), outcomes.done("after"))
    go.set()
    outcomes.wait(4)

    assert _stored(store) == []
    errors = [outcomes.of(name)[1] for name in ("before", "no parent", "after")]
    assert all(error is not None for error in errors)
    assert errors[0] is errors[1] is errors[2]  # the commit's own
    assert outcomes.of("held") == (None, None)  # the batch before was committed

    writer.submit(_insert(store, 4), outcomes.done("next"))  # and the writer goes on
    outcomes.wait(5)
    assert outcomes.of("next") == (4, None)
    assert _stored(store) == [4]


def test_writes_run_and_report_in_the_order_they_were_queued(
    store: Store, writer: GroupCommit
) -> None:
    outcomes = Outcomes()
    ran: list[int] = []

    def write(n: int) -> Callable[[], int]:
        def run() -> int:
            ran.append(n)
            return n

        return run

    go = _held(writer, outcomes)  # half of them queued while a batch commits
    for n in range(20):
        writer.submit(write(n), outcomes.done(str(n)))
    go.set()
    for n in range(20, 40):
        writer.submit(write(n), outcomes.done(str(n)))
    outcomes.wait(41)

    assert ran == list(range(40))
    assert [name for name, _, _ in outcomes.got] == ["held", *map(str, range(40))]


def test_close_commits_what_is_queued_then_stops_and_later_writes_are_refused(
    store: Store, writer: GroupCommit
) -> None:
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    for n in range(10):
        writer.submit(_insert(store, n), outcomes.done(f"row {n}"))
    closed: list[bool] = []
    closing = threading.Thread(target=lambda: closed.append(writer.close(10)))
    closing.start()  # its stop is queued behind the ten
    go.set()
    closing.join(10)

    assert not closing.is_alive()
    assert closed == [True]
    assert _stored(store) == list(range(10))
    assert all(error is None for _, _, error in outcomes.got)

    writer.submit(_insert(store, 10), outcomes.done("late"))
    _, error = outcomes.of("late")  # at once, in the caller
    assert isinstance(error, RuntimeError)
    assert "stopped" in str(error)
    assert _stored(store) == list(range(10))
    assert writer.close() is True  # a second close is a no-op


def test_a_writer_closed_before_any_write_refuses_one(store: Store) -> None:
    group = GroupCommit(store)
    assert group.close(timeout=10)
    outcomes = Outcomes()
    group.submit(lambda: None, outcomes.done("late"))
    assert isinstance(outcomes.of("late")[1], RuntimeError)


def test_writes_run_in_the_writer_thread(store: Store, writer: GroupCommit) -> None:
    outcomes = Outcomes()
    writer.submit(lambda: threading.current_thread().name, outcomes.done("where"))
    outcomes.wait(1)
    assert outcomes.of("where") == ("memlane-writer-test", None)


def _batch_lock_free(store: Store) -> bool:
    """Whether another replica could take the batch lock now (from this thread's own
    connection, in a transaction of its own)."""
    with _sql(store)._writing() as db:
        row = db.one("SELECT pg_try_advisory_xact_lock(?, ?) AS got", LOCK_CLASS, BATCH_LOCK)
    assert row is not None
    return bool(row["got"])


def test_on_postgresql_a_batch_holds_the_replicas_batch_lock_until_it_commits(
    pg_url: str,
) -> None:
    """Two replicas' batches taking sessions' rows in different orders would deadlock:
    one batch at a time (SQLite's write lock is one writer at a time already)."""
    store = PostgresStore(pg_url)
    writer = GroupCommit(store)
    try:
        _one_batch_at_a_time(store, writer)
    finally:
        writer.close(timeout=10)
        store.close()


def _one_batch_at_a_time(store: Store, writer: GroupCommit) -> None:
    assert _batch_lock_free(store)
    outcomes = Outcomes()
    go = _held(writer, outcomes)
    assert not _batch_lock_free(store)
    go.set()
    outcomes.wait(1)
    assert _batch_lock_free(store)


def test_on_postgresql_a_write_that_catches_a_failed_statement_is_undone_whole(
    pg_url: str,
) -> None:
    """A store call inside a write joins the write's savepoint (no savepoint of its own:
    two round trips each). After a failed statement PostgreSQL refuses the rest of the
    transaction; a write that caught the error and went on is undone whole and reported,
    and the batch's other writes still commit."""
    store = PostgresStore(pg_url)
    writer = GroupCommit(store)
    try:
        with _sql(store)._writing() as db:
            db.run("CREATE TABLE probe (id INTEGER PRIMARY KEY, parent INTEGER)")
        outcomes = Outcomes()

        def caught() -> None:
            _insert(store, 2)()
            with contextlib.suppress(psycopg.errors.UniqueViolation):
                _insert(store, 1)()  # already written by the batch's first write

        _between(store, writer, outcomes, "caught", caught)

        assert _stored(store) == [1, 3]
        value, error = outcomes.of("caught")
        assert value is None
        assert isinstance(error, StoreError)
        assert "caught" in str(error)
        assert outcomes.of("after") == (3, None)
    finally:
        writer.close(timeout=10)
        store.close()
