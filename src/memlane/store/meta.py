"""The `MetaStore` role, the same SQL on every backend: small key/value facts."""

from __future__ import annotations

from memlane.store.sql import D, SqlStore


class SqlMeta(SqlStore[D]):
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
