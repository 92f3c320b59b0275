"""Facts written before they had validity carry over when a store is opened by this memlane.

Each backend's database is built as the migrations before validity left it, filled
with an update's tombstone, its replacement and a plain fact, then opened.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import psycopg

from memlane.store import Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite import schema as sqlite_schema
from tests.store.old_schema import postgres_before, sqlite_before

CREATED = datetime(2026, 1, 10, tzinfo=UTC)
REPLACED = datetime(2026, 2, 20, 12, 0, tzinfo=UTC)
ROWS = [
    # id, text, created, updated, deleted, replaced_by
    ("old", "The user lives in Berlin", CREATED, REPLACED, True, "new"),
    ("new", "The user lives in Lisbon", REPLACED, REPLACED, False, None),
    ("plain", "The user likes tea", CREATED, CREATED, False, None),
]
INSERT = (
    "INSERT INTO facts (id, scope, conversation_id, role, text, created_at, updated_at, "
    "deleted, replaced_by) VALUES ({marks})"
)


def carried_over(store: Store) -> None:
    old, new, plain = (store.get_fact(i) for i in ("old", "new", "plain"))
    assert old is not None
    assert new is not None
    assert plain is not None
    assert (old.deleted, old.valid_to, old.replaced_by) == (True, REPLACED, "new")
    assert (new.supersedes, new.valid_to, new.since) == ("old", None, REPLACED)
    assert (plain.valid_from, plain.valid_to, plain.supersedes) == (None, None, None)
    assert plain.since == CREATED


def test_sqlite_facts_get_their_validity_when_the_file_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    raw = sqlite_before(path, sqlite_schema.m007_fact_validity)
    for fact_id, text, created, updated, deleted, replaced_by in ROWS:
        raw.execute(
            INSERT.format(marks=", ".join("?" * 9)),
            (
                fact_id,
                "ns:r",
                "c",
                "memory",
                text,
                created.isoformat(),
                updated.isoformat(),
                int(deleted),
                replaced_by,
            ),
        )
    raw.close()
    store = SQLiteStore(path)
    try:
        carried_over(store)
    finally:
        store.close()


def test_postgres_facts_get_their_validity_when_the_database_is_opened(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        plain = postgres_before(conn, "m004_fact_validity")
        for row in ROWS:
            fact_id, text, created, updated, deleted, replaced_by = row
            plain.execute(
                INSERT.format(marks=", ".join(["%s"] * 9)),
                (fact_id, "ns:r", "c", "memory", text, created, updated, deleted, replaced_by),
            )
    store = PostgresStore(pg_url)
    try:
        carried_over(store)
    finally:
        store.close()
