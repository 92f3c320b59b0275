"""The `SessionStore` role, written once for every SQL backend.

What differs by backend is how a fork copies the messages with their search
documents and vectors (`_copy_messages`); the rules are here: a fork keeps the
running summary only when it keeps everything the summary covers, a session's
index summary is a search document of its namespace (`index_summaries`), and
deleting a session deletes its messages, events, state, its conversation's facts
and all their documents (its summary's too), and unlinks its forks (their
`parent_id` and `fork_position` are cleared: they stay, with their own copy).
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from collections.abc import Callable, Collection
from typing import Any, Unpack

from memlane.store.arguments import SessionChanges, SessionQuery, Usage
from memlane.store.base import SessionNotFound, StoreError
from memlane.store.codec import now
from memlane.store.documents import Doc, session_doc
from memlane.store.rows import SESSION_COLUMNS, Row, decoded, session_from_row
from memlane.store.sql import D, Db, SqlStore, Where, among, select
from memlane.types import Session

STATE_OF_SESSION = "SELECT name, value FROM session_state WHERE session_id = ? ORDER BY name"
SESSION_WITH_STATE = (
    f"SELECT {SESSION_COLUMNS}, client_digest, st.name AS state_name, st.value AS state_value "
    "FROM sessions LEFT JOIN session_state st ON st.session_id = sessions.id "
    "WHERE tenant = ? AND key = ? ORDER BY st.name"
)
"""A session's row once per state text it has (once, with none): read in one statement,
which on PostgreSQL is one round trip in front of every request, not two."""


def hold_session(db: Db, session_id: str, *, lock: bool = True) -> str:
    """The session's namespace, its row held by this transaction unless `lock` is off;
    `SessionNotFound` when there is no such session."""
    row = db.one(
        f"SELECT namespace FROM sessions WHERE id = ?{db.lock if lock else ''}", session_id
    )
    if row is None:
        raise SessionNotFound(f"no session with id {session_id}")
    return str(row["namespace"])


def update_session_row(
    db: Db, session_id: str, assignments: str, *params: Any, active: bool = True
) -> None:
    """`UPDATE sessions SET {assignments}` (their `?` bound to `params`) with the session
    marked as active now (unless not `active`); `SessionNotFound` when there is no such
    session."""
    if active:
        assignments, params = f"{assignments}, updated_at = ?", (*params, db.time(now()))
    changed = db.run(f"UPDATE sessions SET {assignments} WHERE id = ?", *params, session_id)
    if not changed:
        raise SessionNotFound(f"no session with id {session_id}")


def count_usage(db: Db, session_id: str, usage: Usage) -> None:
    """Add `usage` to the session's token and cost counters. Counters only: `updated_at`
    is in three of the table's indexes, and the write usage comes with (the answer's
    messages, a tool round's event, an import's row) marks the session active already;
    a third stamp per answer was the writer's costliest statement."""
    update_session_row(
        db,
        session_id,
        "prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?, "
        "cost_usd = cost_usd + ?",
        *usage_counts(usage),
        active=False,
    )


def usage_counts(usage: Usage | None) -> tuple[int, int, float]:
    """The prompt tokens, completion tokens and cost `usage` adds to a session's counters."""
    if not usage:
        return 0, 0, 0.0
    return (
        usage.get("prompt_tokens", 0),
        usage.get("completion_tokens", 0),
        usage.get("cost_usd", 0.0),
    )


def forked_summary(source: Row, at_position: int | None) -> tuple[str, int]:
    """The fork's running summary and its `summarized_count`: the source's, if the fork
    keeps every message it summarised, else none."""
    if at_position is None or at_position >= source["summarized_count"]:
        return source["summary"], int(source["summarized_count"])
    return "", 0


def index_summaries(
    db: D, put: Callable[[D, Doc, str | None], None], session_ids: Collection[str] | None = None
) -> int:
    """Keep the summary documents of these sessions (every one: None) in step with their
    metadata (`documents.session_doc`): put where there is a summary, removed where there
    is none; returns how many were put. Used on update, on load and by a migration."""
    where = Where()
    if session_ids is not None:
        ids = sorted(session_ids)
        where.add(among("id", ids), *ids)
    rows = select(db, SESSION_COLUMNS, "sessions", where, db.seq)
    put_count = 0
    for row in rows:
        session = session_from_row(row)
        found = session_doc(session)
        if found is None:
            db.run("DELETE FROM docs WHERE kind = 'session' AND ref = ?", session.id)
            continue
        put(db, *found)
        put_count += 1
    return put_count


class SqlSessions(SqlStore[D]):
    @abstractmethod
    def _copy_messages(self, db: D, source_id: str, new_id: str, at_position: int | None) -> int:
        """Copy the source's `ok` messages before `at_position` (all without one) into the
        new session, indexed under their new ids with their vectors; return how many."""

    def ensure_session(
        self,
        key: str,
        *,
        namespace: str | None = None,
        tenant: str = "",
        session_id: str | None = None,
    ) -> Session:
        found = self.find_session(key, tenant=tenant)
        if found is not None:
            return found
        stamp = now()
        with self._writing() as db:
            # Race-free across processes: the unique key decides, the loser reads the winner's.
            db.run(
                "INSERT INTO sessions (id, key, namespace, created_at, updated_at, tenant) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING",
                session_id or uuid.uuid4().hex,
                key,
                key if namespace is None else namespace,
                db.time(stamp),
                db.time(stamp),
                tenant,
            )
            row = db.one(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = ? AND key = ?", tenant, key
            )
        assert row is not None
        return session_from_row(row)

    def get_session(self, session_id: str) -> Session | None:
        with self._reading() as db:
            row = db.one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", session_id)
        return session_from_row(row) if row else None

    def find_session(self, key: str, *, tenant: str = "") -> Session | None:
        with self._reading() as db:
            row = db.one(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = ? AND key = ?", tenant, key
            )
        return session_from_row(row) if row else None

    def find_session_state(
        self, key: str, *, tenant: str = ""
    ) -> tuple[Session, dict[str, str]] | None:
        with self._reading() as db:
            rows = db.all(SESSION_WITH_STATE, tenant, key)
        if not rows:
            return None
        session = session_from_row(rows[0], client_digest=rows[0]["client_digest"])
        state = {r["state_name"]: r["state_value"] for r in rows if r["state_name"] is not None}
        return session, state

    def list_sessions(self, **query: Unpack[SessionQuery]) -> list[Session]:
        where = Where().equal("tenant", query.get("tenant", ""))
        where.equal("namespace", query.get("namespace"))
        with self._reading() as db:
            order = f"updated_at DESC, {db.seq} DESC"
            rows = select(db, SESSION_COLUMNS, "sessions", where, order, query.get("limit"))
        return [session_from_row(r) for r in rows]

    def update_session(self, session_id: str, **changes: Unpack[SessionChanges]) -> Session:
        metadata = changes.get("metadata")
        with self._writing() as db:
            update_session_row(
                db,
                session_id,
                "title = coalesce(?, title), summary = coalesce(?, summary), "
                "summarized_count = coalesce(?, summarized_count), "
                "metadata = coalesce(?, metadata)",
                changes.get("title"),
                changes.get("summary"),
                changes.get("summarized_count"),
                db.json(dict(metadata)) if metadata is not None else None,
                active=changes.get("active", True),
            )
            if metadata is not None:
                index_summaries(db, self._put_doc, [session_id])
            row = db.one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", session_id)
        assert row is not None
        return session_from_row(row)

    def retitle(self, session_id: str, title: str) -> None:
        with self._writing() as db:
            update_session_row(db, session_id, "title = ?", title, active=False)

    def add_usage(self, session_id: str, **usage: Unpack[Usage]) -> None:
        with self._writing() as db:
            count_usage(db, session_id, usage)

    def delete_session(self, session_id: str) -> bool:
        with self._writing() as db:
            # Index rows of the session (its messages, events and facts) go with it.
            db.run("DELETE FROM docs WHERE session_id = ?", session_id)
            db.run(
                "DELETE FROM docs WHERE kind = 'fact' AND ref IN "
                "(SELECT id FROM facts WHERE conversation_id = ?)",
                session_id,
            )
            db.run("DELETE FROM facts WHERE conversation_id = ?", session_id)
            # Its forks and children stay, no longer linked to a session that is gone.
            db.run(
                "UPDATE sessions SET parent_id = NULL, fork_position = NULL WHERE parent_id = ?",
                session_id,
            )
            deleted = db.run("DELETE FROM sessions WHERE id = ?", session_id) > 0
        return deleted

    def fork_session(
        self, session_id: str, *, new_key: str, at_position: int | None = None
    ) -> Session:
        new_id = uuid.uuid4().hex
        stamp = now()
        with self._writing() as db:
            source = db.one(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?{db.lock}", session_id
            )
            if source is None:
                raise SessionNotFound(f"no session with id {session_id}")
            tenant = source["tenant"]
            taken = db.one("SELECT 1 FROM sessions WHERE tenant = ? AND key = ?", tenant, new_key)
            if taken is not None:
                raise StoreError(f"a session with key {new_key!r} already exists")
            summary, summarized_count = forked_summary(source, at_position)
            db.run(
                "INSERT INTO sessions (id, key, namespace, title, parent_id, fork_position, "
                "summary, summarized_count, metadata, created_at, updated_at, tenant) "
                "VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
                new_id,
                new_key,
                source["namespace"],
                session_id,
                at_position,
                summary,
                summarized_count,
                db.json(decoded(source["metadata"])),
                db.time(stamp),
                db.time(stamp),
                tenant,
            )
            copied = self._copy_messages(db, session_id, new_id, at_position)
            db.run("UPDATE sessions SET message_count = ? WHERE id = ?", copied, new_id)
            index_summaries(db, self._put_doc, [new_id])  # the summary it keeps, as its own
            db.run(
                "INSERT INTO session_state (session_id, name, value) "
                "SELECT ?, name, value FROM session_state WHERE session_id = ?",
                new_id,
                session_id,
            )
            row = db.one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", new_id)
        assert row is not None
        return session_from_row(row)

    # --- scaffold state ---------------------------------------------------------------
    def get_state(self, session_id: str) -> dict[str, str]:
        with self._reading() as db:
            rows = db.all(STATE_OF_SESSION, session_id)
        return {r["name"]: r["value"] for r in rows}

    def set_state(self, session_id: str, name: str, value: str | None) -> None:
        with self._writing() as db:
            hold_session(db, session_id)
            if value is None:
                db.run(
                    "DELETE FROM session_state WHERE session_id = ? AND name = ?", session_id, name
                )
            else:
                db.run(
                    "INSERT INTO session_state (session_id, name, value) VALUES (?, ?, ?) "
                    "ON CONFLICT (session_id, name) DO UPDATE SET value = excluded.value",
                    session_id,
                    name,
                    value,
                )
            db.run("UPDATE sessions SET updated_at = ? WHERE id = ?", db.time(now()), session_id)
