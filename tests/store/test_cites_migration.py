"""A store written before memories recorded the files they cite, opened by this memlane:
its facts read back citing nothing, and a fact can record what it cites."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from memlane.store import Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite import schema as sqlite_schema
from memlane.types import Citations, CitedFile
from tests.store.old_schema import postgres_before, sqlite_before

STAMP = "2026-01-10T00:00:00+00:00"
FACT = (
    "INSERT INTO facts (id, scope, conversation_id, role, text, created_at, updated_at) "
    "VALUES ('f1', 'ns:/src/api', 'c', 'memory', 'The config is conf/app.toml', {t}, {t})"
)
CITES = Citations(
    "/src/api", (CitedFile("conf/app.toml", "git:" + "a" * 40),), datetime(2026, 1, 11, tzinfo=UTC)
)


def carried_over(store: Store) -> None:
    fact = store.get_fact("f1")
    assert fact is not None
    assert fact.cites is None
    store.put_fact(replace(fact, cites=CITES))
    assert store.get_fact("f1").cites == CITES  # type: ignore[union-attr]


def test_sqlite_store_opened_by_this_memlane(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    raw = sqlite_before(path, sqlite_schema.m013_fact_cites)
    raw.execute(FACT.format(t="?"), (STAMP, STAMP))
    raw.close()
    store = SQLiteStore(path)
    try:
        carried_over(store)
    finally:
        store.close()


def test_postgres_store_opened_by_this_memlane(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        plain = postgres_before(conn, "m008_fact_cites")
        plain.execute(FACT.format(t="%s"), (STAMP, STAMP))
    store = PostgresStore(pg_url)
    try:
        carried_over(store)
    finally:
        store.close()
