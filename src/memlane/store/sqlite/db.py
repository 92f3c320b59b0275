"""`store.sql.Db` over one SQLite connection: what every SQLite module reads and writes through."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from memlane.store.codec import dumps, ts_to_text
from memlane.store.rows import Row
from memlane.store.sql import Statement, json_key


class SQLiteDb:
    """`store.sql.Db` over one SQLite connection: text timestamps, JSON as text."""

    seq = "rowid"
    lock = ""  # a write transaction holds the whole file

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def time(self, value: datetime) -> str:
        return ts_to_text(value)

    def json(self, value: Any) -> str:
        return dumps(value)

    def json_values(self, column: str, key: str) -> str:
        path = f"$.{json_key(key)}"
        return (
            f"(SELECT value FROM json_each({column}, '{path}') "
            f"WHERE json_type({column}, '{path}') IN ('text', 'array') AND type = 'text')"
        )

    def one(self, sql: str, *params: Any) -> Row | None:
        cursor = self.conn.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        row: sqlite3.Row | None = cursor.fetchone()
        return row

    def all(self, sql: str, *params: Any) -> list[Row]:
        cursor = self.conn.execute(sql, params)
        cursor.row_factory = sqlite3.Row
        return list(cursor.fetchall())

    def column(self, sql: str, *params: Any) -> list[Any]:
        return [row[0] for row in self.conn.execute(sql, params)]

    def run(self, sql: str, *params: Any) -> int:
        return self.conn.execute(sql, params).rowcount

    def insert(self, sql: str, *params: Any) -> int:
        rowid = self.conn.execute(sql, params).lastrowid
        assert rowid is not None
        return rowid

    def reads(self, *statements: Statement) -> list[list[Row]]:
        return [self.all(sql, *params) for sql, params in statements]
