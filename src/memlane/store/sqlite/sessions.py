"""Sessions on SQLite: what a fork copies and what a deletion tidies (`store.sessions`)."""

from __future__ import annotations

from memlane.store.rows import MESSAGE_COLUMNS
from memlane.store.sessions import SqlSessions
from memlane.store.sqlite.db import SQLiteDb

_COPY_MESSAGE = f"""INSERT INTO messages ({MESSAGE_COLUMNS})
    SELECT NULL, ?, position, role, kind, origin, wire, content, text, content_hash,
    token_count, status, created_at FROM messages WHERE id = ?"""


class SQLiteSessions(SqlSessions[SQLiteDb]):
    def _copy_messages(
        self, db: SQLiteDb, source_id: str, new_id: str, at_position: int | None
    ) -> int:
        rows = db.all(
            "SELECT id FROM messages WHERE session_id = ? AND status = 'ok' AND position < ? "
            "ORDER BY position",
            source_id,
            at_position if at_position is not None else 2**62,
        )
        for row in rows:
            old_id = row["id"]
            db.insert(_COPY_MESSAGE, new_id, old_id)
        return len(rows)
