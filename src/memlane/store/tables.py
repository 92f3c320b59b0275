"""Written once for every SQL backend: the `MetaStore` role, table counts, and how the
rows a copy loads get their search documents (`store.sqlite.copy`, `store.postgres.copy`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from memlane.store.base import check_table
from memlane.store.codec import moment
from memlane.store.documents import Doc
from memlane.store.sql import D, Db, SqlStore, among


class SqlTables(SqlStore[D]):
    def get_meta(self, key: str) -> str | None:
        with self._reading() as db:
            row = db.one("SELECT value FROM meta WHERE key = ?", key)
        return str(row["value"]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._writing() as db:
            db.run(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                key,
                value,
            )

    def claim_meta(self, key: str, value: str) -> str:
        with self._writing() as db:
            db.run(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                key,
                value,
            )
            row = db.one("SELECT value FROM meta WHERE key = ?", key)
        assert row is not None
        return str(row["value"])

    def count(self, table: str) -> int:
        check_table(table)
        with self._reading() as db:
            row = db.one(f"SELECT count(*) AS n FROM {table}")
        assert row is not None
        return int(row["n"])


def namespaces(db: Db, session_ids: Collection[str]) -> dict[str, str]:
    """The namespace of each of these sessions (those that exist)."""
    ids = sorted(session_ids)
    rows = db.all(f"SELECT id, namespace FROM sessions WHERE {among('id', ids)}", *ids)
    return {r["id"]: r["namespace"] for r in rows}


def loaded_event_docs(db: Db, rows: Sequence[Mapping[str, Any]]) -> list[Doc]:
    """Search documents for loaded events that have text, scoped by their session's
    namespace."""
    scopes = namespaces(db, {r["session_id"] for r in rows})
    return [
        Doc(
            "event",
            str(r["id"]),
            scopes.get(r["session_id"], ""),
            r["session_id"],
            None,
            r["text"],
            moment(r["created_at"]),
        )
        for r in rows
        if r["text"]
    ]
