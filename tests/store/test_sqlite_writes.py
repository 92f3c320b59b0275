"""What storing a turn asks of SQLite: few statements, the same texts every turn.

The store's writer commits every request's writes in one thread (`store.group_commit`),
so each statement a turn runs is CPU the whole proxy waits for, and a statement whose
text is new each time is prepared again and pushes a prepared one out of the
connection's cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane.store import SessionNotFound
from memlane.store.base import NewMessage, SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact, Message


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "m.db")
    yield store
    store.close()


@contextmanager
def traced(store: SQLiteStore) -> Iterator[list[str]]:
    """The statements this thread's connection runs inside (normalised whitespace)."""
    seen: list[str] = []
    conn = store._conn()
    conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split())))
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def test_the_writes_of_a_batch_reuse_the_same_savepoint_statements(store: SQLiteStore) -> None:
    session = store.ensure_session("s")
    with traced(store) as seen, store.transaction():
        for n in range(40):
            with store.transaction():
                store.append_messages(session.id, [NewMessage(Message("user", f"m{n}"), 1)])
    savepoints = {sql for sql in seen if sql.startswith(("SAVEPOINT", "RELEASE"))}
    assert savepoints == {"SAVEPOINT w0", "RELEASE w0", "SAVEPOINT w1", "RELEASE w1"}
    assert [m.message.text for m in store.list_messages(session.id)] == [f"m{n}" for n in range(40)]


def test_a_nested_write_that_fails_undoes_itself_and_the_depth_is_kept(
    store: SQLiteStore,
) -> None:
    session = store.ensure_session("s")
    with traced(store) as seen, store.transaction():
        store.append_messages(session.id, [NewMessage(Message("user", "kept"), 1)])
        with pytest.raises(SessionNotFound):
            store.add_event("no-such-session", "turn", {})
        store.add_event(session.id, "turn", {"n": 1})
    assert "ROLLBACK TO w0" in seen
    assert {sql for sql in seen if sql.startswith("SAVEPOINT")} == {"SAVEPOINT w0"}
    assert [m.message.text for m in store.list_messages(session.id)] == ["kept"]
    assert [e.payload for e in store.list_events(session.id)] == [{"n": 1}]


def test_a_days_counters_are_added_in_one_statement(store: SQLiteStore) -> None:
    with traced(store) as seen:
        store.add_daily_counts("2026-01-02", {"requests": 1, "prompt_tokens": 7, "failed": 0})
        store.add_daily_counts("2026-01-02", {"requests": 1, "completion_tokens": 3})
    assert len([sql for sql in seen if sql.startswith("INSERT INTO daily_counts")]) == 2
    assert store.daily_counts(since="2026-01-01") == {
        "2026-01-02": {"requests": 2, "prompt_tokens": 7, "completion_tokens": 3}
    }


def test_an_event_finds_its_session_by_marking_it_active(store: SQLiteStore) -> None:
    session = store.ensure_session("s")
    with traced(store) as seen:
        event = store.add_event(session.id, "turn", {})
    assert not [sql for sql in seen if sql.startswith("SELECT")]
    stored = store.get_session(session.id)
    assert stored is not None
    assert stored.updated_at == event.created_at
    with pytest.raises(SessionNotFound):
        store.add_event("no-such-session", "turn", {})


def test_appending_reads_both_next_ids_in_one_statement(store: SQLiteStore) -> None:
    session = store.ensure_session("s")
    with traced(store) as seen:
        stored = store.append_messages(
            session.id, [NewMessage(Message("user", "a"), 1), NewMessage(Message("user", "b"), 1)]
        )
    assert len([sql for sql in seen if "sqlite_sequence" in sql]) == 1
    assert [m.position for m in stored] == [0, 1]
    assert [m.id for m in stored] == [m.id for m in store.list_messages(session.id)]


def _exchange(conversation: str, number: int) -> list[Fact]:
    at = datetime(2026, 5, 1, 12, tzinfo=UTC) + timedelta(minutes=number)
    return [
        Fact(
            id=f"{conversation}-{number}-{role}",
            scope=f"session:{conversation}",
            conversation_id=conversation,
            role=role,
            text=f"{role} turn {number} of {conversation} about topic{number}",
            created_at=at + timedelta(seconds=index),
            updated_at=at + timedelta(seconds=index),
        )
        for index, role in enumerate(("user", "assistant"))
    ]


def test_indexing_a_group_of_turn_entries_takes_a_few_statements_not_a_few_each(
    store: SQLiteStore,
) -> None:
    for conversation in ("a", "b"):
        store.put_facts(_exchange(conversation, 0))  # a turn before: its document is redone
    group = [f for n in range(1, 9) for c in ("a", "b") for f in _exchange(c, n)]
    with traced(store) as seen:
        store.put_facts(group)
    inserted = [sql for sql in seen if sql.startswith("INSERT INTO docs")]
    others = {sql for sql in seen if " docs " in sql and sql not in inserted}  # once each
    assert len(inserted) == 32  # a row each, in one `executemany`
    # one read of the documents there, and the documents of the two turns before (whose
    # next turn came) given their new words: not a read and an id look-up per document
    assert len(others) == 3, sorted(others)
    stored = {f.id for f in store.list_facts()}
    assert {f.id for f in group} <= stored
    hits = store.keyword_search("topic3", SearchFilter(scopes=("session:a",)))
    assert {hit.ref for hit in hits} >= {"a-3-user", "a-3-assistant"}
    assert store.reindex_turns() == 0  # every turn's document is what a rebuild makes
