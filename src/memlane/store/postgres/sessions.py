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
        # Index the copies under their new ids, reusing the vectors (no re-embedding).
        pairs = conn.execute(
            "SELECT o.id::text AS old_ref, n.id::text AS new_ref FROM messages o "
            "JOIN messages n ON n.session_id = %s AND n.position = o.position "
            "WHERE o.session_id = %s",
            (new_id, source_id),
        ).fetchall()
        if pairs:
            refs = ([p["old_ref"] for p in pairs], [p["new_ref"] for p in pairs])
            conn.execute(
                "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, "
                "created_at, active) SELECT d.kind, m.new_ref, d.scope, %s, d.role, d.text, "
                "d.terms, d.length, d.created_at, d.active FROM docs d "
                "JOIN unnest(%s::text[], %s::text[]) AS m(old_ref, new_ref) "
                "ON d.kind = 'message' AND d.ref = m.old_ref ORDER BY d.seq",
                (new_id, *refs),
            )
            conn.execute(
                "INSERT INTO vectors (kind, ref, model, dim, embedding) "
                "SELECT v.kind, m.new_ref, v.model, v.dim, v.embedding FROM vectors v "
                "JOIN unnest(%s::text[], %s::text[]) AS m(old_ref, new_ref) "
                "ON v.kind = 'message' AND v.ref = m.old_ref",
                refs,
            )
        return len(copied)
