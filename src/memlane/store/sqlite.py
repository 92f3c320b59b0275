"""The embedded store: one SQLite file in WAL mode, FTS5 for keywords, vectors as BLOBs.

Each thread gets its own connection. Every write is one `BEGIN IMMEDIATE`
transaction, so a writer waits (busy timeout) instead of failing, and a crash
loses at most the transaction in flight. `synchronous=normal` survives a
process crash; `full` also survives power loss. The keyword index is an FTS5
table over the analyser's terms (`store.analysis`); queries run over in-process
caches derived from the file and kept in step with it — BM25 postings
(`store.keyword_index`) and vectors (`store.vector_index`).
"""

from __future__ import annotations

import functools
import itertools
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from memlane.store import analysis
from memlane.store.base import (
    TABLES,
    NewEvent,
    NewMessage,
    SearchFilter,
    SessionNotFound,
    StoreError,
    SyncResult,
    Vector,
)
from memlane.store.checkpoint import Checkpointer
from memlane.store.codec import (
    FACT_COLUMNS,
    as_vector,
    dumps,
    fact_from_row,
    fact_to_row,
    message_from_json,
    message_to_json,
    now,
    ts_from_text,
    ts_to_text,
    vector_from_bytes,
    vector_from_text,
    vector_to_bytes,
    vector_to_text,
)
from memlane.store.documents import (
    AFTER,
    BEFORE,
    TURN_ROLES,
    is_turn,
    turn_document,
    turn_documents,
)
from memlane.store.keyword_index import KeywordIndex
from memlane.store.sqlite_schema import (
    ForeignDatabase,
    NewerSchema,
    check,
    doc_tags,
    migrate,
)
from memlane.store.transcript import plan_sync
from memlane.store.vector_index import VectorCache
from memlane.types import DocKind, Event, Fact, FactRole, Hit, Session, StoredMessage

BUSY_TIMEOUT_MS = 10_000

_SESSION_COLUMNS = (
    "id, key, namespace, title, parent_id, fork_position, summary, summarized_count, metadata, "
    "prompt_tokens, completion_tokens, cost_usd, message_count, created_at, updated_at"
)
_MESSAGE_COLUMNS = (
    "id, session_id, position, role, kind, origin, wire, content, text, content_hash, "
    "token_count, status, created_at"
)
_EVENT_COLUMNS = "id, session_id, kind, payload, text, created_at"
_INSERT_DOC = """INSERT INTO docs
    (rowid, kind, ref, scope, session_id, role, text, terms, created_at, active, tags)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
_DOC_COLUMNS = "d.rowid, d.kind, d.ref, d.scope, d.session_id, d.text, d.created_at"


class SQLiteStore:
    """`Store` over one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: Path, *, synchronous: Literal["normal", "full"] = "normal") -> None:
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite:///{self.path}"
        if synchronous not in ("normal", "full"):
            raise StoreError(f"sqlite synchronous must be 'normal' or 'full', not {synchronous!r}")
        self._synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._caches: dict[str, VectorCache] = {}
        self._keywords = KeywordIndex()
        self.checkpointer = Checkpointer(self.path, self._conn)
        self._closed = False
        self._open()

    # --- connections ----------------------------------------------------------
    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for the database {self.path}: {exc.strerror or exc}; "
                "choose a writable MEMLANE_HOME"
            ) from None
        if self.path.exists() and not self.path.is_file():
            raise StoreError(
                f"{self.path} is not a database file; move it aside or choose another MEMLANE_HOME"
            )
        try:
            conn = self._conn()
            check(conn)  # before anything writes: a refused file must stay as it was
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            migrate(conn)
        except ForeignDatabase as exc:
            self.close()
            raise StoreError(
                f"{self.path} is a SQLite database of another application (tables: "
                f"{', '.join(exc.args[0][:5])}); memlane leaves it alone: choose another "
                "MEMLANE_HOME"
            ) from None
        except NewerSchema as exc:
            self.close()
            raise StoreError(
                f"{self.path} was written by a newer memlane (migrations "
                f"{', '.join(exc.args[0])}); upgrade memlane to open it"
            ) from None
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(_explain(self.path, exc)) from None

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"the store {self.path} is closed")
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA secure_delete = ON")  # deleted text is overwritten, not left
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # `store.checkpoint` does it
        except sqlite3.DatabaseError as exc:
            raise StoreError(_explain(self.path, exc)) from None
        self._local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn

    def close(self) -> None:
        self.checkpointer.stop()
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: the write lock is taken up front, so no upgrade deadlock.

        Threads of this process first queue on a Python lock: SQLite's busy handler
        polls with sleeps of up to 100 ms, so a writer waiting on another thread of
        the same proxy would otherwise sleep (and poll) long after the lock is free.
        Other processes still wait through the busy timeout. The WAL is checkpointed
        by a background thread (`store.checkpoint`), never by the committing write.
        """
        conn = self._conn()
        if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            raise StoreError(
                f"the database {self.path} stayed locked by another writer in this process for "
                f"{BUSY_TIMEOUT_MS // 1000} s; retry"
            )
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise StoreError(_explain(self.path, exc)) from None
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                conn.execute("ROLLBACK")
                raise StoreError(_explain(self.path, exc)) from None
        finally:
            self._write_lock.release()
        self.checkpointer.committed()

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        conn = self._conn()
        try:
            cursor = conn.execute(sql, params)
            cursor.row_factory = sqlite3.Row
            return cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(_explain(self.path, exc)) from None

    # --- sessions -------------------------------------------------------------
    def ensure_session(self, key: str, *, namespace: str | None = None) -> Session:
        found = self.find_session(key)
        if found is not None:
            return found
        stamp = ts_to_text(now())
        with self._write() as conn:
            conn.execute(
                """INSERT INTO sessions (id, key, namespace, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING""",
                (uuid.uuid4().hex, key, namespace if namespace is not None else key, stamp, stamp),
            )
        created = self.find_session(key)
        assert created is not None
        return created

    def get_session(self, session_id: str) -> Session | None:
        rows = self._read(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return _session(rows[0]) if rows else None

    def find_session(self, key: str) -> Session | None:
        rows = self._read(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ?", (key,))
        return _session(rows[0]) if rows else None

    def list_sessions(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> list[Session]:
        where, params = ("WHERE namespace = ?", [namespace]) if namespace is not None else ("", [])
        rows = self._read(
            f"""SELECT {_SESSION_COLUMNS} FROM sessions {where}
                ORDER BY updated_at DESC, rowid DESC LIMIT ?""",
            [*params, -1 if limit is None else limit],
        )
        return [_session(r) for r in rows]

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        summary: str | None = None,
        summarized_count: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = title
        if summary is not None:
            changes["summary"] = summary
        if summarized_count is not None:
            changes["summarized_count"] = summarized_count
        if metadata is not None:
            changes["metadata"] = dumps(dict(metadata))
        changes["updated_at"] = ts_to_text(now())
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with self._write() as conn:
            cursor = conn.execute(
                f"UPDATE sessions SET {assignments} WHERE id = ?", [*changes.values(), session_id]
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(f"no session with id {session_id}")
        session = self.get_session(session_id)
        assert session is not None
        return session

    def add_usage(
        self,
        session_id: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
    ) -> None:
        with self._write() as conn:
            cursor = conn.execute(
                """UPDATE sessions SET prompt_tokens = prompt_tokens + ?,
                   completion_tokens = completion_tokens + ?, cost_usd = cost_usd + ?,
                   updated_at = ? WHERE id = ?""",
                (prompt_tokens, completion_tokens, cost_usd, ts_to_text(now()), session_id),
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(f"no session with id {session_id}")

    def delete_session(self, session_id: str) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM docs WHERE session_id = ?", (session_id,))
            conn.execute(
                """DELETE FROM docs WHERE kind = 'fact' AND ref IN
                   (SELECT id FROM facts WHERE conversation_id = ?)""",
                (session_id,),
            )
            conn.execute("DELETE FROM facts WHERE conversation_id = ?", (session_id,))
            cursor = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            if cursor.rowcount > 0:
                # FTS5 keeps a deleted document's terms in its segments until they are
                # merged: merging now leaves no trace of the deleted text in the index.
                conn.execute("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
            return cursor.rowcount > 0

    def fork_session(
        self, session_id: str, *, new_key: str, at_position: int | None = None
    ) -> Session:
        new_id = uuid.uuid4().hex
        stamp = ts_to_text(now())
        with self._write() as conn:
            source = _one(conn, f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", session_id)
            if source is None:
                raise SessionNotFound(f"no session with id {session_id}")
            if _one(conn, "SELECT 1 FROM sessions WHERE key = ?", new_key) is not None:
                raise StoreError(f"a session with key {new_key!r} already exists")
            limit = at_position if at_position is not None else 2**62
            keeps_summary = at_position is None or at_position >= source["summarized_count"]
            conn.execute(
                """INSERT INTO sessions (id, key, namespace, title, parent_id, fork_position,
                   summary, summarized_count, metadata, created_at, updated_at)
                   VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    new_id,
                    new_key,
                    source["namespace"],
                    session_id,
                    at_position,
                    source["summary"] if keeps_summary else "",
                    source["summarized_count"] if keeps_summary else 0,
                    source["metadata"],
                    stamp,
                    stamp,
                ),
            )
            rows = conn.execute(
                f"""SELECT {_MESSAGE_COLUMNS} FROM messages
                    WHERE session_id = ? AND status = 'ok' AND position < ? ORDER BY position""",
                (session_id, limit),
            ).fetchall()
            for row in rows:
                old_id = row[0]
                new_message_id = conn.execute(
                    f"""INSERT INTO messages ({_MESSAGE_COLUMNS})
                        SELECT NULL, ?, position, role, kind, origin, wire, content, text,
                        content_hash, token_count, status, created_at FROM messages WHERE id = ?""",
                    (new_id, old_id),
                ).lastrowid
                assert new_message_id is not None
                self._index_copy(conn, "message", str(old_id), str(new_message_id), new_id)
            conn.execute("UPDATE sessions SET message_count = ? WHERE id = ?", (len(rows), new_id))
            conn.execute(
                """INSERT INTO session_state (session_id, name, value)
                   SELECT ?, name, value FROM session_state WHERE session_id = ?""",
                (new_id, session_id),
            )
        forked = self.get_session(new_id)
        assert forked is not None
        return forked

    def _index_copy(
        self, conn: sqlite3.Connection, kind: str, old_ref: str, new_ref: str, session_id: str
    ) -> None:
        """Index a copied document under its new ref, reusing its vectors (no re-embedding)."""
        source = _one(
            conn,
            "SELECT scope, role, text, terms, created_at, active FROM docs "
            "WHERE kind = ? AND ref = ?",
            kind,
            old_ref,
        )
        if source is None:
            return
        (doc_id,) = _insert_docs(
            conn,
            [
                (
                    kind,
                    new_ref,
                    source["scope"],
                    session_id,
                    source["role"],
                    source["text"],
                    source["terms"],
                    source["created_at"],
                    source["active"],
                    doc_tags(kind, source["scope"], session_id),
                )
            ],
        )
        conn.execute(
            """INSERT INTO vectors (doc_id, model, dim, vec)
               SELECT ?, v.model, v.dim, v.vec FROM vectors v JOIN docs d ON d.rowid = v.doc_id
               WHERE d.kind = ? AND d.ref = ?""",
            (doc_id, kind, old_ref),
        )

    # --- scaffold state ---------------------------------------------------------
    def get_state(self, session_id: str) -> dict[str, str]:
        rows = self._read(
            "SELECT name, value FROM session_state WHERE session_id = ? ORDER BY name",
            (session_id,),
        )
        return {r["name"]: r["value"] for r in rows}

    def set_state(self, session_id: str, name: str, value: str | None) -> None:
        with self._write() as conn:
            self._require_session(conn, session_id)
            if value is None:
                conn.execute(
                    "DELETE FROM session_state WHERE session_id = ? AND name = ?",
                    (session_id, name),
                )
            else:
                conn.execute(
                    """INSERT INTO session_state (session_id, name, value) VALUES (?, ?, ?)
                       ON CONFLICT (session_id, name) DO UPDATE SET value = excluded.value""",
                    (session_id, name, value),
                )
            conn.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (ts_to_text(now()), session_id)
            )

    # --- messages -----------------------------------------------------------------
    def sync_messages(self, session_id: str, incoming: Sequence[NewMessage]) -> SyncResult:
        with self._write() as conn:
            namespace = self._require_session(conn, session_id)
            stored = conn.execute(
                """SELECT id, content_hash FROM messages WHERE session_id = ?
                   AND origin = 'client' AND status = 'ok' ORDER BY position""",
                (session_id,),
            ).fetchall()
            hashes = [item.message.fingerprint() for item in incoming]
            plan = plan_sync([row[1] for row in stored], hashes)
            superseded = 0
            if plan.supersede_from is not None:
                stale = [row[0] for row in stored[plan.supersede_from :]]
                superseded = self._set_status(conn, stale, "superseded")
            added = self._append(
                conn, session_id, namespace, incoming[plan.matched :], hashes[plan.matched :]
            )
        return SyncResult(matched=plan.matched, added=tuple(added), superseded=superseded)

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage]
    ) -> list[StoredMessage]:
        with self._write() as conn:
            namespace = self._require_session(conn, session_id)
            return self._append(conn, session_id, namespace, messages)

    def _append(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        namespace: str,
        items: Sequence[NewMessage],
        hashes: Sequence[str] | None = None,
    ) -> list[StoredMessage]:
        """`hashes`: the items' fingerprints when the caller has them already."""
        if not items:
            return []
        last = conn.execute(
            "SELECT max(position) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        position = -1 if last is None else int(last)
        # The write lock is held, so the next AUTOINCREMENT ids are ours to hand out:
        # one executemany instead of a statement per message.
        message_id = _next_id(conn, "messages")
        created = now()
        stamp = ts_to_text(created)
        out: list[StoredMessage] = []
        tags = doc_tags("message", namespace, session_id)
        rows: list[tuple[Any, ...]] = []
        docs: list[tuple[Any, ...]] = []  # new messages: their documents cannot exist yet
        for index, item in enumerate(items):
            position += 1
            message_id += 1
            message = item.message
            content_hash = hashes[index] if hashes is not None else message.fingerprint()
            rows.append(
                (
                    message_id,
                    session_id,
                    position,
                    message.role,
                    message.kind,
                    message.origin,
                    message.wire,
                    dumps(message_to_json(message)),
                    message.text,
                    content_hash,
                    item.token_count,
                    stamp,
                )
            )
            if message.text:
                docs.append(
                    (
                        "message",
                        str(message_id),
                        namespace,
                        session_id,
                        None,
                        message.text,
                        index_terms(message.text),
                        stamp,
                        1,
                        tags,
                    )
                )
            out.append(
                StoredMessage(
                    id=message_id,
                    session_id=session_id,
                    position=position,
                    message=message,
                    content_hash=content_hash,
                    token_count=item.token_count,
                    created_at=created,
                )
            )
        conn.executemany(
            """INSERT INTO messages (id, session_id, position, role, kind, origin, wire, content,
               text, content_hash, token_count, status, created_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?)""",
            rows,
        )
        _insert_docs(conn, docs)
        conn.execute(
            """UPDATE sessions SET message_count = message_count + ?, updated_at = ?
               WHERE id = ?""",
            (len(out), stamp, session_id),
        )
        return out

    def list_messages(
        self,
        session_id: str,
        *,
        transcript_only: bool = False,
        include_superseded: bool = False,
        since_position: int = 0,
    ) -> list[StoredMessage]:
        status = "" if include_superseded else "AND status != 'superseded'"
        rows = self._read(
            f"""SELECT {_MESSAGE_COLUMNS} FROM messages
                WHERE session_id = ? AND position >= ? {status} ORDER BY position""",
            (session_id, since_position),
        )
        messages = [_stored_message(r) for r in rows]
        if transcript_only:
            messages = [m for m in messages if m.transcript]
        return messages

    def set_message_status(self, message_id: int, status: str) -> None:
        if status not in ("ok", "failed", "superseded"):
            raise StoreError(f"unknown message status {status!r}: use ok, failed or superseded")
        with self._write() as conn:
            if not self._set_status(conn, [message_id], status):
                exists = _one(conn, "SELECT 1 FROM messages WHERE id = ?", message_id)
                if exists is None:
                    raise StoreError(f"no message with id {message_id}")

    def _set_status(self, conn: sqlite3.Connection, ids: Sequence[int], status: str) -> int:
        """Change status, keeping the session's message_count and the index in step."""
        changed = 0
        for message_id in ids:
            row = _one(conn, "SELECT session_id, status FROM messages WHERE id = ?", message_id)
            if row is None or row["status"] == status:
                continue
            delta = (status != "superseded") - (row["status"] != "superseded")
            conn.execute("UPDATE messages SET status = ? WHERE id = ?", (status, message_id))
            conn.execute(
                "UPDATE docs SET active = ? WHERE kind = 'message' AND ref = ?",
                (int(status != "superseded"), str(message_id)),
            )
            if delta:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + ? WHERE id = ?",
                    (delta, row["session_id"]),
                )
            changed += 1
        return changed

    def _require_session(self, conn: sqlite3.Connection, session_id: str) -> str:
        """The session's namespace, or SessionNotFound."""
        row = _one(conn, "SELECT namespace FROM sessions WHERE id = ?", session_id)
        if row is None:
            raise SessionNotFound(f"no session with id {session_id}")
        return str(row["namespace"])

    # --- events ---------------------------------------------------------------------
    def add_event(
        self, session_id: str, kind: str, payload: Mapping[str, Any], *, text: str = ""
    ) -> Event:
        return self.add_events(session_id, [NewEvent(kind, payload, text)])[0]

    def add_events(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        created = now()
        stamp = ts_to_text(created)
        out: list[Event] = []
        with self._write() as conn:
            namespace = self._require_session(conn, session_id)
            for event in events:
                event_id = conn.execute(
                    """INSERT INTO events (session_id, kind, payload, text, created_at)
                       VALUES (?, ?, ?, ?, ?)""",
                    (session_id, event.kind, dumps(dict(event.payload)), event.text, stamp),
                ).lastrowid
                assert event_id is not None
                if event.text:
                    _index(
                        conn, "event", str(event_id), namespace, session_id, None, event.text, stamp
                    )
                payload = dict(event.payload)
                out.append(Event(event_id, session_id, event.kind, payload, event.text, created))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, session_id))
        return out

    def list_events(
        self, session_id: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[Event]:
        where = "session_id = ?" + (" AND kind = ?" if kind is not None else "")
        params: list[Any] = [session_id] + ([kind] if kind is not None else [])
        rows = self._read(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE {where} ORDER BY id DESC LIMIT ?",
            [*params, -1 if limit is None else limit],
        )
        return [_event(r) for r in reversed(rows)]

    # --- facts ------------------------------------------------------------------------
    def put_fact(self, fact: Fact) -> None:
        row = fact_to_row(fact)
        with self._write() as conn:
            conn.execute(
                f"""INSERT INTO facts ({", ".join(FACT_COLUMNS)})
                    VALUES ({", ".join("?" for _ in FACT_COLUMNS)})
                    ON CONFLICT (id) DO UPDATE SET
                    {", ".join(f"{c} = excluded.{c}" for c in FACT_COLUMNS[1:])}""",
                [row[c] for c in FACT_COLUMNS],
            )
            _index_fact(conn, fact)

    def reindex_turns(self, progress: Callable[[int, int], None] | None = None) -> int:
        with self._write() as conn:
            return rebuild_turn_documents(conn, progress)

    def get_fact(self, fact_id: str) -> Fact | None:
        rows = self._read(f"SELECT {', '.join(FACT_COLUMNS)} FROM facts WHERE id = ?", (fact_id,))
        return fact_from_row(dict(rows[0])) if rows else None

    def list_facts(
        self,
        *,
        scope: str | None = None,
        conversation_id: str | None = None,
        roles: Sequence[FactRole] | None = None,
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Fact]:
        where: list[str] = []
        params: list[Any] = []
        if scope is not None:
            where.append("scope = ?")
            params.append(scope)
        if conversation_id is not None:
            where.append("conversation_id = ?")
            params.append(conversation_id)
        if roles is not None:
            where.append(f"role IN ({_marks(roles)})")
            params.extend(roles)
        if not include_deleted:
            where.append("deleted = 0")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(
            f"""SELECT {", ".join(FACT_COLUMNS)} FROM facts {clause}
                ORDER BY created_at, rowid LIMIT ?""",
            [*params, -1 if limit is None else limit],
        )
        return [fact_from_row(dict(zip(FACT_COLUMNS, r, strict=True))) for r in rows]

    def delete_fact(self, fact_id: str, *, replaced_by: str | None = None) -> bool:
        with self._write() as conn:
            cursor = conn.execute(
                """UPDATE facts SET deleted = 1, replaced_by = coalesce(?, replaced_by),
                   updated_at = ? WHERE id = ?""",
                (replaced_by, ts_to_text(now()), fact_id),
            )
            conn.execute("UPDATE docs SET active = 0 WHERE kind = 'fact' AND ref = ?", (fact_id,))
            return cursor.rowcount > 0

    def purge_fact(self, fact_id: str) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM docs WHERE kind = 'fact' AND ref = ?", (fact_id,))
            return conn.execute("DELETE FROM facts WHERE id = ?", (fact_id,)).rowcount > 0

    # --- search -------------------------------------------------------------------------
    def keyword_search(self, query: str, flt: SearchFilter, *, limit: int = 10) -> list[Hit]:
        """BM25 through the in-process keyword index (`store.keyword_index`), FTS5's scores;
        the winners' rows are read (and re-checked against the filter) in SQL."""
        words = analysis.query_terms(query)
        if not words or limit <= 0 or not flt.kinds:
            return []
        if flt.scopes is not None and not flt.scopes:
            return []
        try:
            self._keywords.refresh(self._conn())
        except sqlite3.DatabaseError as exc:
            raise StoreError(_explain(self.path, exc)) from None
        where, params = _filter_sql(flt)
        fetch = limit + 8
        while True:
            found = self._keywords.search(words, flt, fetch)
            if not found:
                return []
            scores = {hit.rowid: hit.score for hit in found}
            rows = self._read(
                f"""SELECT {_DOC_COLUMNS} FROM docs d
                    WHERE d.rowid IN ({_marks(found)}) AND {where}""",
                [*scores, *params],
            )
            if len(rows) >= limit or len(found) < fetch:
                rows.sort(key=lambda r: (-scores[r["rowid"]], r["rowid"]))
                return [_hit(r, scores[r["rowid"]]) for r in rows[:limit]]
            fetch *= 4  # rows changed since the refresh filled the window: look further

    def put_vectors(
        self, kind: DocKind, items: Sequence[tuple[str, Vector]], *, model: str
    ) -> None:
        encoded = [(ref, as_vector(v, what=f"vector for {kind} {ref}")) for ref, v in items]
        with self._write() as conn:
            for ref, vector in encoded:
                doc = _one(conn, "SELECT rowid FROM docs WHERE kind = ? AND ref = ?", kind, ref)
                if doc is None:
                    continue  # the document went away while it was being embedded
                conn.execute(
                    "INSERT OR REPLACE INTO vectors (doc_id, model, dim, vec) VALUES (?, ?, ?, ?)",
                    (doc[0], model, int(vector.shape[0]), vector_to_bytes(vector)),
                )

    def vector_search(
        self, vector: Vector, flt: SearchFilter, *, model: str, limit: int = 10
    ) -> list[Hit]:
        query = as_vector(vector, what="query vector")
        if limit <= 0 or not flt.kinds:
            return []
        cache = self._cache(model)
        try:
            cache.refresh(self._conn())
        except sqlite3.DatabaseError as exc:
            raise StoreError(_explain(self.path, exc)) from None
        where, params = _filter_sql(flt)
        fetch = limit * 4 + 16
        while True:
            candidates = cache.search(query, flt, fetch)
            if not candidates:
                return []
            scores = {c.doc_id: c.score for c in candidates}
            rows = self._read(
                f"""SELECT {_DOC_COLUMNS} FROM docs d
                    WHERE d.rowid IN ({_marks(candidates)}) AND {where}""",
                [*scores, *params],
            )
            if len(rows) >= limit or len(candidates) < fetch:
                hits = [_hit(r, scores[r["rowid"]]) for r in rows]
                hits.sort(key=lambda h: h.score, reverse=True)
                return hits[:limit]
            fetch *= 4  # stale or inactive rows filled the window: look further

    def _cache(self, model: str) -> VectorCache:
        with self._lock:
            cache = self._caches.get(model)
            if cache is None:
                cache = self._caches[model] = VectorCache(model)
            return cache

    def get_vectors(self, kind: DocKind, refs: Sequence[str], *, model: str) -> dict[str, Vector]:
        if not refs:
            return {}
        rows = self._read(
            f"""SELECT d.ref, v.vec FROM vectors v JOIN docs d ON d.rowid = v.doc_id
                WHERE d.kind = ? AND v.model = ? AND d.ref IN ({_marks(refs)})""",
            [kind, model, *refs],
        )
        return {r["ref"]: vector_from_bytes(r["vec"]) for r in rows}

    def missing_vectors(
        self, kind: DocKind, *, model: str, limit: int = 1000
    ) -> list[tuple[str, str]]:
        rows = self._read(
            """SELECT d.ref, d.text FROM docs d WHERE d.kind = ? AND d.active = 1
               AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.doc_id = d.rowid AND v.model = ?)
               ORDER BY d.rowid LIMIT ?""",
            (kind, model, limit),
        )
        return [(r["ref"], r["text"]) for r in rows]

    def drop_vectors(self, *, except_model: str) -> int:
        with self._write() as conn:
            dropped = conn.execute("DELETE FROM vectors WHERE model != ?", (except_model,)).rowcount
        with self._lock:
            self._caches = {m: c for m, c in self._caches.items() if m == except_model}
        return dropped

    # --- meta -------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0]["value"]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute(
                """INSERT INTO meta (key, value) VALUES (?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                (key, value),
            )

    # --- whole-store copy -------------------------------------------------------------
    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        _check_table(table)
        if table == "vectors":
            rows = self._read(
                """SELECT d.kind, d.ref, v.model, v.dim, v.vec FROM vectors v
                   JOIN docs d ON d.rowid = v.doc_id ORDER BY v.id"""
            )
            for r in rows:
                yield {
                    "kind": r["kind"],
                    "ref": r["ref"],
                    "model": r["model"],
                    "dim": r["dim"],
                    "vec": vector_to_text(vector_from_bytes(r["vec"])),
                }
            return
        order = {"session_state": "session_id, name", "meta": "key"}.get(table, "rowid")
        for r in self._read(f"SELECT * FROM {table} ORDER BY {order}"):
            yield _dump_row(table, dict(r))

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        _check_table(table)
        with self._write() as conn:
            for row in rows:
                _load_row(conn, table, row)

    def count(self, table: str) -> int:
        _check_table(table)
        return int(self._read(f"SELECT count(*) AS n FROM {table}")[0]["n"])


# --- module helpers -----------------------------------------------------------------


def _explain(path: Path, exc: sqlite3.DatabaseError) -> str:
    """One line naming the file, what is wrong, and what to do."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (
            f"{path} is not a readable memlane database ({text}); memlane left it untouched: "
            "restore it from a backup or move it aside to start a new one"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return (
            f"cannot open the database {path} for writing ({text}); check the permissions of "
            "the file and its folder, or choose another MEMLANE_HOME"
        )
    if "locked" in text or "busy" in text:
        return (
            f"the database {path} stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS // 1000} s ({text}); retry, or stop the process holding it"
        )
    return f"database error in {path}: {text}"


def index_terms(text: str) -> str:
    """`analysis.terms(text)` joined for FTS5, memoised per whitespace-separated chunk.

    The analyser's tokens never span whitespace, so the terms of a text are the
    terms of its chunks in order; chat text repeats words, so the cache makes
    indexing several times faster (a test pins the equivalence).
    """
    return " ".join(filter(None, map(_chunk_terms, text.split())))


@functools.lru_cache(maxsize=200_000)
def _chunk_terms(chunk: str) -> str:
    return " ".join(analysis.terms(chunk))


def _insert_docs(conn: sqlite3.Connection, docs: Sequence[tuple[Any, ...]]) -> list[int]:
    """Insert new documents and their FTS rows; return their rowids.

    Rows are (kind, ref, scope, session_id, role, text, terms, created_at,
    active, tags). The FTS rows are written here rather than by a trigger: a
    trigger makes FTS5 inserts about 2.5 times slower. Called inside a write
    transaction, so the next AUTOINCREMENT ids are ours to hand out.
    """
    if not docs:
        return []
    first = _next_id(conn, "docs") + 1
    rowids = list(range(first, first + len(docs)))
    conn.executemany(_INSERT_DOC, [(rowid, *doc) for rowid, doc in zip(rowids, docs, strict=True)])
    conn.executemany(
        "INSERT INTO docs_fts (rowid, terms, tags) VALUES (?, ?, ?)",
        [(rowid, doc[6], doc[9]) for rowid, doc in zip(rowids, docs, strict=True)],
    )
    return rowids


def _next_id(conn: sqlite3.Connection, table: str) -> int:
    """The last id an AUTOINCREMENT table handed out (the next one is this + 1)."""
    row = conn.execute(
        f"""SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),
            coalesce((SELECT max(rowid) FROM {table}), 0))"""
    ).fetchone()
    return int(row[0])


def _one(conn: sqlite3.Connection, sql: str, *params: Any) -> sqlite3.Row | None:
    cursor = conn.execute(sql, params)
    cursor.row_factory = sqlite3.Row
    row: sqlite3.Row | None = cursor.fetchone()
    return row


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def _index(
    conn: sqlite3.Connection,
    kind: str,
    ref: str,
    scope: str,
    session_id: str | None,
    role: str | None,
    text: str,
    stamp: str,
    *,
    active: bool = True,
    document: str | None = None,
) -> None:
    """Insert or refresh one search document; a changed text drops its stale vectors.

    `document` is what the keyword index reads when it is more than the text (a
    turn with its neighbours); the text is still what a hit shows.
    """
    old = _one(
        conn, "SELECT rowid, text, terms, tags FROM docs WHERE kind = ? AND ref = ?", kind, ref
    )
    terms = index_terms(text if document is None else document)
    tags = doc_tags(kind, scope, session_id)
    if old is None:
        _insert_docs(
            conn, [(kind, ref, scope, session_id, role, text, terms, stamp, int(active), tags)]
        )
        return
    conn.execute(
        """UPDATE docs SET scope = ?, session_id = ?, role = ?, created_at = ?, active = ?
           WHERE rowid = ?""",
        (scope, session_id, role, stamp, int(active), old["rowid"]),
    )
    if old["tags"] != tags:
        conn.execute("UPDATE docs SET tags = ? WHERE rowid = ?", (tags, old["rowid"]))
    if old["text"] != text or old["terms"] != terms:
        conn.execute(
            "UPDATE docs SET text = ?, terms = ? WHERE rowid = ?", (text, terms, old["rowid"])
        )
    if old["text"] != text:
        conn.execute("DELETE FROM vectors WHERE doc_id = ?", (old["rowid"],))


def _index_fact(conn: sqlite3.Connection, fact: Fact, *, neighbours: bool = True) -> None:
    """Index an entry: a turn with its neighbours; the turns whose neighbourhood now holds
    this one are indexed again (the one before it; those after it, when it came late)."""
    document = None
    if is_turn(fact):
        before = _turns(conn, fact, "<", BEFORE)
        after = _turns(conn, fact, ">", BEFORE)
        document = turn_document(
            fact, [t.text for t in reversed(before)], [t.text for t in after[:AFTER]]
        )
        if neighbours:  # the turns whose windows now hold this one
            for other in (*before[:AFTER], *after[:BEFORE]):
                _index_fact(conn, other, neighbours=False)
    _index(
        conn,
        "fact",
        fact.id,
        fact.scope,
        fact.conversation_id,
        fact.role,
        fact.text,
        ts_to_text(fact.created_at),
        active=not fact.deleted,
        document=document,
    )


def rebuild_turn_documents(
    conn: sqlite3.Connection, progress: Callable[[int, int], None] | None = None
) -> int:
    """Index every live turn again with its neighbours (migration m005, `memory reindex`);
    returns how many documents changed."""
    rows = conn.execute(
        f"""SELECT {", ".join(FACT_COLUMNS)} FROM facts
            WHERE deleted = 0 AND role IN ({_marks(TURN_ROLES)})
            ORDER BY scope, conversation_id, created_at""",
        list(TURN_ROLES),
    ).fetchall()
    facts = [fact_from_row(dict(zip(FACT_COLUMNS, r, strict=True))) for r in rows]
    changed = 0
    done = 0
    for _, group in itertools.groupby(facts, key=lambda f: (f.scope, f.conversation_id)):
        turns = list(group)
        for ref, document in turn_documents(turns).items():
            cursor = conn.execute(
                "UPDATE docs SET terms = ? WHERE kind = 'fact' AND ref = ? AND terms != ?",
                (terms := index_terms(document), ref, terms),
            )
            changed += cursor.rowcount
        done += len(turns)
        if progress is not None:
            progress(done, len(facts))
    return changed


def _turns(conn: sqlite3.Connection, fact: Fact, direction: str, limit: int) -> list[Fact]:
    """The live turns of `fact`'s conversation just before ("<") or after (">") it, nearest
    first."""
    order = "DESC" if direction == "<" else "ASC"
    rows = conn.execute(
        f"""SELECT {", ".join(FACT_COLUMNS)} FROM facts
            WHERE conversation_id = ? AND scope = ? AND deleted = 0
              AND role IN ({_marks(TURN_ROLES)}) AND created_at {direction} ?
            ORDER BY created_at {order} LIMIT ?""",
        [fact.conversation_id, fact.scope, *TURN_ROLES, ts_to_text(fact.created_at), limit],
    ).fetchall()
    return [fact_from_row(dict(zip(FACT_COLUMNS, r, strict=True))) for r in rows]


def _filter_sql(flt: SearchFilter) -> tuple[str, list[Any]]:
    """The filter as SQL over `docs d`. The unary `+` keeps the planner on the rowid the
    caller drives with (FTS match or vector candidates) instead of a (kind, ref) index scan."""
    where = [f"+d.active = 1 AND +d.kind IN ({_marks(flt.kinds)})"]
    params: list[Any] = list(flt.kinds)
    if flt.scopes is not None:
        where.append(f"+d.scope IN ({_marks(flt.scopes)})" if flt.scopes else "0")
        params.extend(flt.scopes)
    if flt.session_id is not None:
        where.append("+d.session_id = ?")
        params.append(flt.session_id)
    if flt.fact_roles is not None:
        where.append(f"(+d.kind != 'fact' OR +d.role IN ({_marks(flt.fact_roles) or 'NULL'}))")
        params.extend(flt.fact_roles)
    return " AND ".join(where), params


def _hit(row: sqlite3.Row, score: float) -> Hit:
    return Hit(
        kind=row["kind"],
        ref=row["ref"],
        scope=row["scope"],
        session_id=row["session_id"],
        text=row["text"],
        score=score,
        created_at=ts_from_text(row["created_at"]),
    )


def _session(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"],
        key=row["key"],
        namespace=row["namespace"],
        created_at=ts_from_text(row["created_at"]),
        updated_at=ts_from_text(row["updated_at"]),
        title=row["title"],
        parent_id=row["parent_id"],
        fork_position=row["fork_position"],
        summary=row["summary"],
        summarized_count=row["summarized_count"],
        metadata=json.loads(row["metadata"]),
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cost_usd=row["cost_usd"],
        message_count=row["message_count"],
    )


def _stored_message(row: sqlite3.Row) -> StoredMessage:
    return StoredMessage(
        id=row["id"],
        session_id=row["session_id"],
        position=row["position"],
        message=message_from_json(json.loads(row["content"])),
        content_hash=row["content_hash"],
        token_count=row["token_count"],
        created_at=ts_from_text(row["created_at"]),
        status=row["status"],
    )


def _event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        session_id=row["session_id"],
        kind=row["kind"],
        payload=json.loads(row["payload"]),
        text=row["text"],
        created_at=ts_from_text(row["created_at"]),
    )


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise StoreError(f"unknown table {table!r}: one of {', '.join(TABLES)}")


_JSON_COLUMNS = {"sessions": "metadata", "messages": "content", "events": "payload"}


def _dump_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    column = _JSON_COLUMNS.get(table)
    if column is not None:
        row[column] = json.loads(row[column])
    if table == "facts":
        row["deleted"] = bool(row["deleted"])
    return row


def _load_row(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> None:
    values = dict(row)
    column = _JSON_COLUMNS.get(table)
    if column is not None:
        values[column] = dumps(values[column])
    if table == "vectors":
        _load_vector(conn, values)
        return
    if table == "facts":
        values["deleted"] = int(bool(values["deleted"]))
    names = list(values)
    conn.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({_marks(names)})",
        [values[n] for n in names],
    )
    if table == "messages" and values["text"]:
        namespace = _one(conn, "SELECT namespace FROM sessions WHERE id = ?", values["session_id"])
        scope = namespace["namespace"] if namespace is not None else ""
        active = values.get("status", "ok") != "superseded"
        _index(
            conn,
            "message",
            str(values["id"]),
            scope,
            values["session_id"],
            None,
            values["text"],
            values["created_at"],
            active=active,
        )
    elif table == "events" and values["text"]:
        namespace = _one(conn, "SELECT namespace FROM sessions WHERE id = ?", values["session_id"])
        scope = namespace["namespace"] if namespace is not None else ""
        _index(
            conn,
            "event",
            str(values["id"]),
            scope,
            values["session_id"],
            None,
            values["text"],
            values["created_at"],
        )
    elif table == "facts":
        _index_fact(conn, fact_from_row(values))


def _load_vector(conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
    doc = _one(conn, "SELECT rowid FROM docs WHERE kind = ? AND ref = ?", row["kind"], row["ref"])
    if doc is None:
        raise StoreError(
            f"vector for {row['kind']} {row['ref']} has no document: load the tables in "
            "store.TABLES order"
        )
    vector = vector_from_text(row["vec"])
    conn.execute(
        "INSERT OR REPLACE INTO vectors (doc_id, model, dim, vec) VALUES (?, ?, ?, ?)",
        (doc[0], row["model"], int(vector.shape[0]), vector_to_bytes(vector)),
    )
