"""A store written before facts linked their turns and sessions' summaries were documents.

Each backend's database is built as the migrations before those two left it, holding a
fact and a session that session indexing had summarised, then opened by this memlane:
the fact reads back with no links, and the summary is found by search at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from memlane.store import SearchFilter, Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite import schema as sqlite_schema
from tests.store.old_schema import postgres_before, sqlite_before

STAMP = "2026-01-10T00:00:00+00:00"
META = json.dumps({"name": "queue-design", "summary": "The queue uses SKIP LOCKED."})
FACT = (
    "INSERT INTO facts (id, scope, conversation_id, role, text, created_at, updated_at) "
    "VALUES ('f1', 'ns:shop', 'c', 'memory', 'The queue is in Postgres', {t}, {t})"
)
SESSION = (
    "INSERT INTO sessions (id, key, namespace, metadata, created_at, updated_at) "
    "VALUES ('s1', 'chat', 'shop', {m}, {t}, {t})"
)


def carried_over(store: Store) -> None:
    fact = store.get_fact("f1")
    assert fact is not None
    assert fact.source_turns == ()
    hits = store.keyword_search(
        "skip locked", SearchFilter(kinds=("session",), scopes=("ns:shop",))
    )
    assert [(h.ref, h.text) for h in hits] == [("s1", "The queue uses SKIP LOCKED.")]
    assert store.get_session("s1") is not None


def test_sqlite_store_opened_by_this_memlane(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    raw = sqlite_before(path, sqlite_schema.m009_fact_sources)
    raw.execute(FACT.format(t="?"), (STAMP, STAMP))
    raw.execute(SESSION.format(m="?", t="?"), (META, STAMP, STAMP))
    raw.close()
    store = SQLiteStore(path)
    try:
        carried_over(store)
    finally:
        store.close()


def test_postgres_store_opened_by_this_memlane(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        plain = postgres_before(conn, "m006_fact_sources")
        plain.execute(FACT.format(t="%s"), (STAMP, STAMP))
        plain.execute(SESSION.format(m="%s::jsonb", t="%s"), (META, STAMP, STAMP))
    store = PostgresStore(pg_url)
    try:
        carried_over(store)
    finally:
        store.close()
