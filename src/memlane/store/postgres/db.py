"""`store.sql.Db` over one PostgreSQL connection: what every PostgreSQL module reads and
writes through."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from memlane.store.rows import Row
from memlane.store.sql import Statement, json_key


class PostgresDb:
    """`store.sql.Db` over one PostgreSQL connection: `?` marks bound as `%s`."""

    seq = "seq"
    lock = " FOR NO KEY UPDATE"
    """Holds a session's row against other writers of its history; `NO KEY UPDATE`
    still lets other transactions add rows (events) that reference it."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def time(self, value: datetime) -> datetime:
        return value

    def json(self, value: Any) -> Jsonb:
        return Jsonb(value)

    def json_values(self, column: str, key: str) -> str:
        field = f"{column} -> '{json_key(key)}'"
        items = (
            f"CASE jsonb_typeof({field}) WHEN 'array' THEN {field} "
            f"WHEN 'string' THEN jsonb_build_array({field}) ELSE '[]'::jsonb END"
        )
        return (
            f"(SELECT element #>> '{{}}' AS value FROM jsonb_array_elements({items}) "
            "AS item(element) WHERE jsonb_typeof(element) = 'string')"
        )

    def one(self, sql: str, *params: Any) -> Row | None:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(bind(sql), params).fetchone()

    def all(self, sql: str, *params: Any) -> list[Row]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(bind(sql), params).fetchall())

    def column(self, sql: str, *params: Any) -> list[Any]:
        with self.conn.cursor(row_factory=tuple_row) as cur:
            return [row[0] for row in cur.execute(bind(sql), params).fetchall()]

    def run(self, sql: str, *params: Any) -> int:
        with self.conn.cursor() as cur:
            return cur.execute(bind(sql), params).rowcount

    def insert(self, sql: str, *params: Any) -> int:
        row = self.one(sql + " RETURNING id", *params)
        assert row is not None
        return int(row["id"])

    def reads(self, *statements: Statement) -> list[list[Row]]:
        """Pipelined: sent together, answered in one round trip."""
        with self.conn.pipeline():
            cursors = [
                self.conn.cursor(row_factory=dict_row).execute(bind(sql), params)
                for sql, params in statements
            ]
        return [list(cur.fetchall()) for cur in cursors]


@functools.lru_cache(maxsize=1024)
def bind(sql: str) -> str:
    """Shared SQL's `?` marks as psycopg's `%s` (a literal `%` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")
