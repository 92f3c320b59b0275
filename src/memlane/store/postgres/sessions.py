"""Sessions on PostgreSQL: what a fork copies, in a few set-wise statements
(`store.sessions` holds the rest)."""

from __future__ import annotations

from memlane.store.postgres.db import PostgresDb
from memlane.store.sessions import SqlSessions


class PostgresSessions(SqlSessions[PostgresDb]):
    def _copy_messages(
        self, db: PostgresDb, source_id: str, new_id: str, at_position: int | None
    ) -> int:
        conn = db.conn
        copied = conn.execute(
            "INSERT INTO messages (session_id, position, role, kind, origin, wire, content, "
            "text, content_hash, token_count, status, created_at) "
            "SELECT %s, position, role, kind, origin, wire, content, text, content_hash, "
            "token_count, status, created_at FROM messages WHERE session_id = %s "
            "AND status = 'ok' AND (%s::int IS NULL OR position < %s) ORDER BY position "
            "RETURNING id",
            (new_id, source_id, at_position, at_position),
        ).fetchall()
        return len(copied)
