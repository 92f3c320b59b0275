"""`copy_store`: a whole store copied between SQLite and PostgreSQL, and verified."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memlane.store import TABLES, NewMessage, SearchFilter, Store, StoreError
from memlane.store.migrate import copy_store, store_counts
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message
from tests.store.contract.support import MODEL, fact, unit


def fill(store: Store, sessions: int = 3) -> None:
    """A bit of everything: sessions, resent and superseded turns, events, state, facts, vectors."""
    for s in range(sessions):
        session = store.ensure_session(f"key-{s}", namespace="repo")
        history = [NewMessage(Message(role="user", text=f"walrus question {s}"))]
        store.sync_messages(session.id, history)
        store.append_messages(session.id, [NewMessage(Message("assistant", f"answer {s}"))])
        store.sync_messages(session.id, [*history, NewMessage(Message("assistant", "edited"))])
        store.add_event(session.id, "dropped", {"n": s}, text=f"dropped walrus {s}")
        store.set_state(session.id, "todo", f"- [ ] {s}")
        store.put_fact(fact(f"f{s}", f"walrus fact {s}", conversation_id=session.id, minutes=s))
        store.put_vectors("fact", [(f"f{s}", unit(s))], model=MODEL)
    store.delete_fact("f0", replaced_by="f1")
    store.set_meta("embedding_model", MODEL)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "a.db")
    yield store
    store.close()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url)
    yield store
    store.close()


def test_sqlite_to_postgres_and_back_keeps_every_row(
    sqlite_store: SQLiteStore, pg_store: PostgresStore, tmp_path: Path
) -> None:
    fill(sqlite_store)
    seen: list[tuple[str, int, int]] = []
    copies = copy_store(sqlite_store, pg_store, batch_size=2, progress=lambda *a: seen.append(a))
    assert [c.table for c in copies] == list(TABLES)
    assert all(c.ok for c in copies)
    assert store_counts(pg_store) == store_counts(sqlite_store)
    assert ("messages", 9, 9) in seen  # progress reaches every table's total
    for table in TABLES:
        assert list(pg_store.dump(table)) == list(sqlite_store.dump(table)), table

    back = SQLiteStore(tmp_path / "back.db")
    try:
        copy_store(pg_store, back)
        for table in TABLES:
            assert list(back.dump(table)) == list(sqlite_store.dump(table)), table
        flt = SearchFilter(scopes=("repo-a",))
        assert [h.ref for h in back.keyword_search("walrus", flt)] == [
            h.ref for h in pg_store.keyword_search("walrus", flt)
        ]
    finally:
        back.close()
    hits = pg_store.vector_search(unit(2), SearchFilter(), model=MODEL, limit=1)
    assert [h.ref for h in hits] == ["f2"]


def test_a_target_that_holds_data_is_refused_and_untouched(
    sqlite_store: SQLiteStore, pg_store: PostgresStore
) -> None:
    fill(sqlite_store)
    pg_store.ensure_session("already-here")
    with pytest.raises(StoreError, match="not empty"):
        copy_store(sqlite_store, pg_store)
    assert [s.key for s in pg_store.list_sessions()] == ["already-here"]
    assert pg_store.count("messages") == 0


class LossyStore:
    """A real store whose `load` silently drops the last row of each message batch."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self.inner.load(table, rows[:-1] if table == "events" else rows)


def test_a_count_mismatch_after_the_copy_is_an_error(
    sqlite_store: SQLiteStore, pg_store: PostgresStore
) -> None:
    fill(sqlite_store)
    with pytest.raises(StoreError, match=r"events: 3 in the source, 2 copied"):
        copy_store(sqlite_store, LossyStore(pg_store))  # type: ignore[arg-type]
