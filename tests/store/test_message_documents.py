"""A stored message is no search document, on either backend, and a store that indexed
messages drops their documents when it is opened by this version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from memlane.store import SearchFilter, Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite.index import index_terms
from tests.store.contract.support import assistant, unit, user

SQLITE_MIGRATION = "m014_no_message_documents"
POSTGRES_MIGRATION = "m009_no_message_documents"


def doc_kinds(store: Store) -> dict[str, int]:
    with store._reading() as db:  # type: ignore[attr-defined]
        found = db.all("SELECT kind, count(*) AS n FROM docs GROUP BY kind")
    return {row["kind"]: int(row["n"]) for row in found}


def test_messages_are_stored_but_not_indexed(store: Store) -> None:
    session = store.ensure_session("s", namespace="ns")
    store.sync_messages(session.id, [user("where does the zebra sleep")])
    store.append_messages(session.id, [assistant("the zebra sleeps standing")])
    store.add_event(session.id, "dropped", {}, text="zebra history dropped")
    fork = store.fork_session(session.id, new_key="fork")

    assert [m.message.text for m in store.list_messages(session.id)] == [
        "where does the zebra sleep",
        "the zebra sleeps standing",
    ]
    assert len(store.list_messages(fork.id)) == 2
    assert doc_kinds(store) == {"event": 1}
    hits = store.keyword_search("zebra", SearchFilter(kinds=("fact", "event", "session")))
    assert [(h.kind, h.text) for h in hits] == [("event", "zebra history dropped")]


def test_sqlite_drops_the_message_documents_an_older_version_indexed(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    session = store.ensure_session("s", namespace="ns")
    (message,) = store.append_messages(session.id, [user("the okapi question")])
    store.add_event(session.id, "dropped", {}, text="okapi history")
    store.close()
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, created_at) "
            "VALUES ('message', ?, 'ns', ?, NULL, 'the okapi question', ?, "
            "'2026-01-01T00:00:00+00:00')",
            (str(message.id), session.id, index_terms("the okapi question")),
        )
        raw.execute(
            "INSERT INTO vectors (doc_id, model, dim, vec) "
            "SELECT rowid, 'm', 16, ? FROM docs WHERE kind = 'message'",
            (unit(1).tobytes(),),
        )
        raw.execute("DELETE FROM migrations WHERE name = ?", (SQLITE_MIGRATION,))
    raw.close()

    reopened = SQLiteStore(path)
    try:
        assert doc_kinds(reopened) == {"event": 1}
        with reopened._reading() as db:
            assert db.all("SELECT count(*) AS n FROM vectors")[0]["n"] == 0
            applied = db.all("SELECT name FROM migrations WHERE name = ?", SQLITE_MIGRATION)
        assert applied
        assert [m.message.text for m in reopened.list_messages(session.id)] == [
            "the okapi question"
        ]
        hits = reopened.keyword_search("okapi", SearchFilter())
        assert [h.kind for h in hits] == ["event"]
    finally:
        reopened.close()


def test_postgres_drops_the_message_documents_an_older_version_indexed(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    session = store.ensure_session("s", namespace="ns")
    (message,) = store.append_messages(session.id, [user("the okapi question")])
    store.add_event(session.id, "dropped", {}, text="okapi history")
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute(
            "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, "
            "created_at, active) VALUES ('message', %s, 'ns', %s, NULL, 'the okapi question', "
            "to_tsvector('simple', 'okapi question'), 2, now(), true)",
            (str(message.id), session.id),
        )
        raw.execute("DELETE FROM migrations WHERE name = %s", (POSTGRES_MIGRATION,))

    reopened = PostgresStore(pg_url)
    try:
        assert doc_kinds(reopened) == {"event": 1}
        assert [m.message.text for m in reopened.list_messages(session.id)] == [
            "the okapi question"
        ]
    finally:
        reopened.close()
    with psycopg.connect(pg_url) as raw:
        names = [r[0] for r in raw.execute("SELECT name FROM migrations").fetchall()]
    assert POSTGRES_MIGRATION in names
