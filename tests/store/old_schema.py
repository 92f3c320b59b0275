"""A database as the migrations before a given one left it: what an older memlane wrote.

Migration tests fill it with rows of that older shape, then open it with this
memlane's store and check what the remaining migrations made of them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import cast

import psycopg

from memlane.store.postgres import schema as pg_schema
from memlane.store.sqlite import schema as sqlite_schema

PgConnection = psycopg.Connection[tuple[object, ...]]


def sqlite_before(
    path: Path, migration: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """A new SQLite file migrated up to (not including) `migration`, open for raw rows."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    before = sqlite_schema.MIGRATIONS.index(migration)
    for step in sqlite_schema.MIGRATIONS[:before]:
        step(raw)
        raw.execute("INSERT INTO migrations VALUES (?, '2026-01-01')", (step.__name__,))
    return raw


def postgres_before(conn: psycopg.Connection[object], name: str) -> PgConnection:
    """An empty PostgreSQL database (autocommit `conn`) migrated up to (not including) `name`."""
    plain = cast("PgConnection", conn)
    plain.execute(
        "CREATE TABLE migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL "
        "DEFAULT now())"
    )
    for step_name, step in pg_schema.MIGRATIONS:
        if step_name == name:
            break
        with plain.transaction():
            step(plain)
            plain.execute("INSERT INTO migrations (name) VALUES (%s)", (step_name,))
    return plain
