"""The PostgreSQL + pgvector backend: one database shared by many proxy replicas.

Same contract as the SQLite file (see `store.base.Store`), built for several
processes on several machines writing at once:

- the schema is migrated at start-up under an advisory lock (`postgres_schema`);
- every write to a session's history locks that session's row first
  (`SELECT … FOR NO KEY UPDATE`), so two replicas serving the same session
  append in order and never store a resent turn twice;
- keyword search ranks with BM25 over a GIN-indexed `tsvector` whose lexemes
  are exactly the shared analyser's terms (so `src/app/main.py`, `snake_case`
  and `camelCase` parts match as they do in SQLite);
- vectors live in one `vector` column of any dimension, with a partial HNSW
  index (cosine) per dimension, created on first use.

Nothing here keeps state another replica could not see: every answer comes
from the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from memlane.store import analysis, codec
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
from memlane.store.postgres_copy import DUMP_SQL, LOADERS, dump_row
from memlane.store.postgres_index import (
    ensure_vector_index,
    index_fact,
    insert_vectors,
    put_doc,
    rebuild_turn_documents,
)
from memlane.store.postgres_index import (
    fact_from_pg_row as _fact,
)
from memlane.store.postgres_keywords import (
    BM25_B,
    BM25_K1,
    FILL_SQL,
    SEARCH_SQL,
    CollectionStats,
    tsquery_literal,
    tsvector_literal,
)
from memlane.store.postgres_schema import MESSAGE_COLUMNS, SESSION_COLUMNS, migrate
from memlane.store.transcript import plan_sync
from memlane.store.urls import redact
from memlane.types import DocKind, Event, Fact, FactRole, Hit, Session, StoredMessage

Conn = psycopg.Connection[dict[str, Any]]
Row = dict[str, Any]

# The most candidates an HNSW scan visits to fill a filtered result (pgvector's default).
HNSW_MAX_SCAN = 20_000
POOL_MAX = 10
CONNECT_TIMEOUT = 10
# Seconds a request waits for a free pooled connection before failing.
POOL_WAIT = 30.0


class PostgresStore:
    """A `Store` over a PostgreSQL database with the pgvector extension."""

    def __init__(self, url: str, *, pool_size: int = POOL_MAX) -> None:
        self.url = redact(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                migrate(cast("psycopg.Connection[tuple[object, ...]]", conn))
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot open the PostgreSQL store at {self.url}: {_reason(exc)} "
                "(check MEMLANE_STORE_URL, that the server runs and has the pgvector extension)"
            ) from exc
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"row_factory": dict_row},
            configure=_configure,
            open=False,
            name="memlane",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.url}") from exc
        self._indexed_dims: set[int] = set()
        self._closed = False
        self._stats = CollectionStats()

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """A pooled connection in one transaction: committed on success, rolled back on error.

        A lost server or an exhausted pool becomes a `StoreError` naming the store.
        """
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            with self._pool.connection(timeout=POOL_WAIT) as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreError(
                f"the PostgreSQL store at {self.url} failed: {_reason(exc)} "
                "(is the server running and reachable?)"
            ) from exc

    # --- sessions -------------------------------------------------------
    def ensure_session(self, key: str, *, namespace: str | None = None) -> Session:
        stamp = codec.now()
        with self._tx() as conn:
            # Race-free across replicas: the unique key decides, the loser reads the winner's row.
            conn.execute(
                "INSERT INTO sessions (id, key, namespace, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                (_new_session_id(), key, key if namespace is None else namespace, stamp, stamp),
            )
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE key = %s", (key,)
            ).fetchone()
        assert row is not None
        return _session(row)

    def get_session(self, session_id: str) -> Session | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
        return _session(row) if row else None

    def find_session(self, key: str) -> Session | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE key = %s", (key,)
            ).fetchone()
        return _session(row) if row else None

    def list_sessions(
        self, *, namespace: str | None = None, limit: int | None = None
    ) -> list[Session]:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions "
                "WHERE (%(ns)s::text IS NULL OR namespace = %(ns)s) "
                "ORDER BY updated_at DESC, seq DESC LIMIT %(limit)s",
                {"ns": namespace, "limit": limit},
            ).fetchall()
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
        with self._tx() as conn:
            row = conn.execute(
                f"""UPDATE sessions SET
                    title = coalesce(%(title)s, title),
                    summary = coalesce(%(summary)s, summary),
                    summarized_count = coalesce(%(summarized_count)s, summarized_count),
                    metadata = coalesce(%(metadata)s, metadata),
                    updated_at = %(now)s
                WHERE id = %(id)s RETURNING {SESSION_COLUMNS}""",
                {
                    "id": session_id,
                    "title": title,
                    "summary": summary,
                    "summarized_count": summarized_count,
                    "metadata": Jsonb(dict(metadata)) if metadata is not None else None,
                    "now": codec.now(),
                },
            ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id}")
        return _session(row)

    def add_usage(
        self,
        session_id: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
    ) -> None:
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE sessions SET prompt_tokens = prompt_tokens + %s, "
                "completion_tokens = completion_tokens + %s, cost_usd = cost_usd + %s, "
                "updated_at = %s WHERE id = %s",
                (prompt_tokens, completion_tokens, cost_usd, codec.now(), session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(f"no session with id {session_id}")

    def delete_session(self, session_id: str) -> bool:
        with self._tx() as conn:
            # Index rows of the session (its messages, events and facts) go with it.
            conn.execute("DELETE FROM docs WHERE session_id = %s", (session_id,))
            conn.execute(
                "DELETE FROM docs WHERE kind = 'fact' AND ref IN "
                "(SELECT id FROM facts WHERE conversation_id = %s)",
                (session_id,),
            )
            conn.execute("DELETE FROM facts WHERE conversation_id = %s", (session_id,))
            cur = conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
            return cur.rowcount > 0

    def fork_session(
        self, session_id: str, *, new_key: str, at_position: int | None = None
    ) -> Session:
        new_id = _new_session_id()
        stamp = codec.now()
        with self._tx() as conn:
            source = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s FOR NO KEY UPDATE",
                (session_id,),
            ).fetchone()
            if source is None:
                raise SessionNotFound(f"no session with id {session_id}")
            if conn.execute("SELECT 1 FROM sessions WHERE key = %s", (new_key,)).fetchone():
                raise StoreError(f"a session with key {new_key!r} already exists")
            # The running summary holds only if the fork keeps everything it summarised.
            keeps_summary = at_position is None or at_position >= source["summarized_count"]
            conn.execute(
                "INSERT INTO sessions (id, key, namespace, title, parent_id, fork_position, "
                "summary, summarized_count, metadata, created_at, updated_at) "
                "VALUES (%s, %s, %s, NULL, %s, %s, %s, %s, %s, %s, %s)",
                (
                    new_id,
                    new_key,
                    source["namespace"],
                    session_id,
                    at_position,
                    source["summary"] if keeps_summary else "",
                    source["summarized_count"] if keeps_summary else 0,
                    Jsonb(source["metadata"]),
                    stamp,
                    stamp,
                ),
            )
            copied = conn.execute(
                "INSERT INTO messages (session_id, position, role, kind, origin, wire, content, "
                "text, content_hash, token_count, status, created_at) "
                "SELECT %s, position, role, kind, origin, wire, content, text, content_hash, "
                "token_count, status, created_at FROM messages WHERE session_id = %s "
                "AND status = 'ok' AND (%s::int IS NULL OR position < %s) ORDER BY position "
                "RETURNING id",
                (new_id, session_id, at_position, at_position),
            ).fetchall()
            # Index the copies under their new ids, reusing the vectors (no re-embedding).
            pairs = conn.execute(
                "SELECT o.id::text AS old_ref, n.id::text AS new_ref FROM messages o "
                "JOIN messages n ON n.session_id = %s AND n.position = o.position "
                "WHERE o.session_id = %s",
                (new_id, session_id),
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
            conn.execute(
                "UPDATE sessions SET message_count = %s WHERE id = %s", (len(copied), new_id)
            )
            conn.execute(
                "INSERT INTO session_state (session_id, name, value) "
                "SELECT %s, name, value FROM session_state WHERE session_id = %s",
                (new_id, session_id),
            )
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s", (new_id,)
            ).fetchone()
        assert row is not None
        return _session(row)

    # --- scaffold state ---------------------------------------------------
    def get_state(self, session_id: str) -> dict[str, str]:
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT name, value FROM session_state WHERE session_id = %s ORDER BY name",
                (session_id,),
            ).fetchall()
        return {r["name"]: r["value"] for r in rows}

    def set_state(self, session_id: str, name: str, value: str | None) -> None:
        with self._tx() as conn:
            _lock_session(conn, session_id)
            if value is None:
                conn.execute(
                    "DELETE FROM session_state WHERE session_id = %s AND name = %s",
                    (session_id, name),
                )
            else:
                conn.execute(
                    "INSERT INTO session_state (session_id, name, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (session_id, name) DO UPDATE SET value = excluded.value",
                    (session_id, name, value),
                )
            conn.execute(
                "UPDATE sessions SET updated_at = %s WHERE id = %s", (codec.now(), session_id)
            )

    # --- messages ---------------------------------------------------------
    def sync_messages(self, session_id: str, incoming: Sequence[NewMessage]) -> SyncResult:
        with self._tx() as conn:
            # The lock makes replicas take turns: the second sees what the first stored.
            session = _lock_session(conn, session_id, with_stored=True)
            stored = session["stored"]
            plan = plan_sync(
                [r["content_hash"] for r in stored],
                [m.message.fingerprint() for m in incoming],
            )
            superseded = 0
            if plan.supersede_from is not None:
                stale = [int(r["id"]) for r in stored[plan.supersede_from :]]
                superseded = _set_status(conn, stale, "superseded")
            added = _append(conn, session_id, session, incoming[plan.matched :])
        return SyncResult(plan.matched, tuple(added), superseded)

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage]
    ) -> list[StoredMessage]:
        with self._tx() as conn:
            session = _lock_session(conn, session_id)
            return _append(conn, session_id, session, messages)

    def list_messages(
        self,
        session_id: str,
        *,
        transcript_only: bool = False,
        include_superseded: bool = False,
        since_position: int = 0,
    ) -> list[StoredMessage]:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = %s "
                "AND position >= %s AND (%s OR status <> 'superseded') ORDER BY position",
                (session_id, since_position, include_superseded),
            ).fetchall()
        out = [_stored(r) for r in rows]
        return [m for m in out if m.transcript] if transcript_only else out

    def set_message_status(self, message_id: int, status: str) -> None:
        if status not in ("ok", "failed", "superseded"):
            raise StoreError(f"unknown message status {status!r}: use ok, failed or superseded")
        with self._tx() as conn:
            row = conn.execute(
                "SELECT session_id FROM messages WHERE id = %s", (message_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"no message with id {message_id}")
            _lock_session(conn, row["session_id"])
            _set_status(conn, [message_id], status)

    # --- events -----------------------------------------------------------
    def add_event(
        self, session_id: str, kind: str, payload: Mapping[str, Any], *, text: str = ""
    ) -> Event:
        return self.add_events(session_id, [NewEvent(kind, payload, text)])[0]

    def add_events(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        stamp = codec.now()
        out: list[Event] = []
        with self._tx() as conn:
            session = conn.execute(
                "SELECT namespace FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
            if session is None:
                raise SessionNotFound(f"no session with id {session_id}")
            for event in events:
                row = conn.execute(
                    "INSERT INTO events (session_id, kind, payload, text, created_at) "
                    "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    (session_id, event.kind, Jsonb(dict(event.payload)), event.text, stamp),
                ).fetchone()
                assert row is not None
                event_id = int(row["id"])
                if event.text:
                    put_doc(
                        conn,
                        "event",
                        str(event_id),
                        session["namespace"],
                        session_id,
                        None,
                        event.text,
                        stamp,
                    )
                out.append(
                    Event(event_id, session_id, event.kind, dict(event.payload), event.text, stamp)
                )
            conn.execute("UPDATE sessions SET updated_at = %s WHERE id = %s", (stamp, session_id))
        return out

    def list_events(
        self, session_id: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[Event]:
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT id, session_id, kind, payload, text, created_at FROM events "
                "WHERE session_id = %(sid)s AND (%(kind)s::text IS NULL OR kind = %(kind)s) "
                "ORDER BY id DESC LIMIT %(limit)s",
                {"sid": session_id, "kind": kind, "limit": limit},
            ).fetchall()
        return [
            Event(r["id"], r["session_id"], r["kind"], r["payload"], r["text"], r["created_at"])
            for r in reversed(rows)
        ]

    # --- long-term memory entries ------------------------------------------
    def put_fact(self, fact: Fact) -> None:
        row = codec.fact_to_row(fact)
        row["created_at"] = fact.created_at
        row["updated_at"] = fact.updated_at
        columns = ", ".join(codec.FACT_COLUMNS)
        values = ", ".join(f"%({c})s" for c in codec.FACT_COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in codec.FACT_COLUMNS if c != "id")
        with self._tx() as conn:
            conn.execute(
                f"INSERT INTO facts ({columns}) VALUES ({values}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                row,
            )
            index_fact(conn, fact)

    def reindex_turns(self, progress: Callable[[int, int], None] | None = None) -> int:
        with self._tx() as conn:
            return rebuild_turn_documents(conn, progress)

    def get_fact(self, fact_id: str) -> Fact | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {', '.join(codec.FACT_COLUMNS)} FROM facts WHERE id = %s", (fact_id,)
            ).fetchone()
        return _fact(row) if row else None

    def list_facts(
        self,
        *,
        scope: str | None = None,
        conversation_id: str | None = None,
        roles: Sequence[FactRole] | None = None,
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Fact]:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(codec.FACT_COLUMNS)} FROM facts WHERE "
                "(%(scope)s::text IS NULL OR scope = %(scope)s) "
                "AND (%(conv)s::text IS NULL OR conversation_id = %(conv)s) "
                "AND (%(roles)s::text[] IS NULL OR role = ANY(%(roles)s)) "
                "AND (%(deleted)s OR NOT deleted) "
                "ORDER BY created_at, seq LIMIT %(limit)s",
                {
                    "scope": scope,
                    "conv": conversation_id,
                    "roles": list(roles) if roles is not None else None,
                    "deleted": include_deleted,
                    "limit": limit,
                },
            ).fetchall()
        return [_fact(r) for r in rows]

    def delete_fact(self, fact_id: str, *, replaced_by: str | None = None) -> bool:
        with self._tx() as conn:
            row = conn.execute(
                "UPDATE facts SET deleted = true, replaced_by = coalesce(%s, replaced_by), "
                "updated_at = %s WHERE id = %s RETURNING id",
                (replaced_by, codec.now(), fact_id),
            ).fetchone()
            conn.execute(
                "UPDATE docs SET active = false WHERE kind = 'fact' AND ref = %s", (fact_id,)
            )
        return row is not None

    def purge_fact(self, fact_id: str) -> bool:
        with self._tx() as conn:
            conn.execute("DELETE FROM docs WHERE kind = 'fact' AND ref = %s", (fact_id,))
            row = conn.execute("DELETE FROM facts WHERE id = %s RETURNING id", (fact_id,))
            return row.fetchone() is not None

    # --- search -------------------------------------------------------------
    def keyword_search(self, query: str, flt: SearchFilter, *, limit: int = 10) -> list[Hit]:
        words = analysis.query_terms(query)
        if not words or limit <= 0 or not flt.kinds:
            return []
        where, params = _filter_sql(flt, "d")
        with self._tx() as conn:
            weights = self._stats.weigh(conn, words)
            params.update(
                terms=weights.words,
                idf=weights.idf,
                any=tsquery_literal(weights.match),
                avgdl=weights.avgdl,
                k1=BM25_K1,
                b=BM25_B,
                limit=limit,
            )
            rows = (
                conn.execute(SEARCH_SQL.format(where=where), params).fetchall()
                if weights.match
                else []
            )
            if len(rows) < limit and len(weights.match) < len(words):
                params.update(
                    any=tsquery_literal(words),
                    found=[r["seq"] for r in rows],
                    limit=limit - len(rows),
                )
                rows += conn.execute(FILL_SQL.format(where=where), params).fetchall()
        return [_hit(r, float(r["score"])) for r in rows]

    def put_vectors(
        self, kind: DocKind, items: Sequence[tuple[str, Vector]], *, model: str
    ) -> None:
        # The last vector given for a ref wins; documents gone meanwhile are skipped.
        prepared = {
            ref: codec.as_vector(vec, what=f"vector for {kind} {ref}") for ref, vec in items
        }
        if not prepared:
            return
        dims = {int(v.shape[0]) for v in prepared.values()}
        with self._tx() as conn:
            for dim in sorted(dims - self._indexed_dims):
                ensure_vector_index(conn, dim)
            insert_vectors(conn, kind, model, prepared)
        self._indexed_dims |= dims

    def vector_search(
        self, vector: Vector, flt: SearchFilter, *, model: str, limit: int = 10
    ) -> list[Hit]:
        query = codec.as_vector(vector, what="query vector")
        if limit <= 0 or not flt.kinds:
            return []
        dim = int(query.shape[0])
        where, params = _filter_sql(flt, "d")
        params.update(model=model, q=query.tolist(), limit=limit)
        # The dimension is inlined (an int) so the planner can use that dimension's index.
        distance = f"v.embedding::vector({dim}) <=> %(q)s::real[]::vector({dim})"
        sql = f"""
            SELECT d.kind, d.ref, d.scope, d.session_id, d.text, d.created_at,
                   {distance} AS distance
            FROM vectors v JOIN docs d ON d.kind = v.kind AND d.ref = v.ref
            WHERE v.model = %(model)s AND v.dim = {dim} AND d.active AND {where}
            ORDER BY distance
            LIMIT %(limit)s
        """
        with self._tx() as conn:
            # A filtered HNSW scan keeps going until `limit` rows pass the filter.
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN}")
            rows = conn.execute(sql, params).fetchall()
        hits = [_hit(r, 1.0 - float(r["distance"])) for r in rows]
        return sorted(hits, key=lambda h: -h.score)

    def get_vectors(self, kind: DocKind, refs: Sequence[str], *, model: str) -> dict[str, Vector]:
        if not refs:
            return {}
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT ref, embedding::real[] AS vec FROM vectors "
                "WHERE kind = %s AND model = %s AND ref = ANY(%s)",
                (kind, model, list(refs)),
            ).fetchall()
        return {r["ref"]: np.asarray(r["vec"], dtype=np.float32) for r in rows}

    def missing_vectors(
        self, kind: DocKind, *, model: str, limit: int = 1000
    ) -> list[tuple[str, str]]:
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT d.ref, d.text FROM docs d WHERE d.kind = %s AND d.active AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.kind = d.kind AND v.ref = d.ref "
                "AND v.model = %s) ORDER BY d.seq LIMIT %s",
                (kind, model, limit),
            ).fetchall()
        return [(r["ref"], r["text"]) for r in rows]

    def drop_vectors(self, *, except_model: str) -> int:
        with self._tx() as conn:
            cur = conn.execute("DELETE FROM vectors WHERE model <> %s", (except_model,))
            return cur.rowcount

    # --- meta -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._tx() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return str(row["value"]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # --- whole-store copy -------------------------------------------------------
    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        _check_table(table)
        with self._tx() as conn, conn.cursor(name=f"dump_{table}") as cur:
            cur.itersize = 1000
            cur.execute(DUMP_SQL[table])
            for row in cur:
                yield dump_row(table, row)

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        _check_table(table)
        if not rows:
            return
        with self._tx() as conn:
            indexed = set(self._indexed_dims)
            LOADERS[table](conn, rows, indexed)
        self._indexed_dims |= indexed

    def count(self, table: str) -> int:
        _check_table(table)
        with self._tx() as conn:
            row = conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
        assert row is not None
        return int(row["n"])


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise StoreError(f"unknown table {table!r}: one of {', '.join(TABLES)}")


# --- helpers ------------------------------------------------------------------


def _configure(conn: Conn) -> None:
    """Every pooled connection reads timestamps in UTC, like the SQLite backend."""
    conn.execute("SET TIME ZONE 'UTC'")
    conn.commit()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _new_session_id() -> str:
    return uuid.uuid4().hex


def _lock_session(conn: Conn, session_id: str, *, with_stored: bool = False) -> Row:
    """Take the session's row lock for this transaction: one writer of its history at a time.

    Returns the session's namespace, the next free message position (it stays
    free until commit) and, when asked, the (id, content_hash) of its stored
    client messages in order. `NO KEY UPDATE` still lets other transactions
    add events that reference the row.

    The reads are separate statements after the locking one, because a
    statement's snapshot predates its wait for the lock; pipelined, they still
    cost one round trip.
    """
    with conn.pipeline():
        locked = conn.execute(
            "SELECT namespace FROM sessions WHERE id = %s FOR NO KEY UPDATE", (session_id,)
        )
        position = conn.execute(
            "SELECT coalesce(max(position) + 1, 0) AS next FROM messages WHERE session_id = %s",
            (session_id,),
        )
        stored = (
            conn.execute(
                "SELECT id, content_hash FROM messages WHERE session_id = %s "
                "AND origin = 'client' AND status = 'ok' ORDER BY position",
                (session_id,),
            )
            if with_stored
            else None
        )
    row = locked.fetchone()
    if row is None:
        raise SessionNotFound(f"no session with id {session_id}")
    next_position = position.fetchone()
    assert next_position is not None
    return {
        "namespace": row["namespace"],
        "next_position": int(next_position["next"]),
        "stored": stored.fetchall() if stored is not None else [],
    }


_APPEND_SQL = """
    WITH x AS (
        SELECT * FROM unnest(
            %(positions)s::int[], %(roles)s::text[], %(kinds)s::text[], %(origins)s::text[],
            %(wires)s::text[], %(contents)s::jsonb[], %(texts)s::text[], %(hashes)s::text[],
            %(tokens)s::int[], %(terms)s::tsvector[], %(lengths)s::int[]
        ) AS x(position, role, kind, origin, wire, content, text, hash, tokens, terms, length)
    ),
    ins AS (
        INSERT INTO messages (session_id, position, role, kind, origin, wire, content, text,
                              content_hash, token_count, status, created_at)
        SELECT %(sid)s, position, role, kind, origin, wire, content, text, hash, tokens, 'ok',
               %(at)s
        FROM x ORDER BY position
        RETURNING id, position
    ),
    indexed AS (
        INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, created_at,
                          active)
        SELECT 'message', ins.id::text, %(scope)s, %(sid)s, NULL, x.text, x.terms, x.length,
               %(at)s, true
        FROM ins JOIN x USING (position) WHERE x.text <> '' ORDER BY ins.position
    ),
    counted AS (
        UPDATE sessions SET message_count = message_count + %(n)s, updated_at = %(at)s
        WHERE id = %(sid)s
    )
    SELECT id, position FROM ins
"""


def _append(
    conn: Conn, session_id: str, locked: Row, items: Sequence[NewMessage]
) -> list[StoredMessage]:
    """Insert after the session's last position; `locked` is what `_lock_session` returned.

    One statement stores the rows, indexes them and counts them, whatever the count.
    """
    if not items:
        return []
    start = int(locked["next_position"])
    created = codec.now()
    hashes = [item.message.fingerprint() for item in items]
    positions = list(range(start, start + len(items)))
    words = [analysis.terms(item.message.text) for item in items]
    rows = conn.execute(
        _APPEND_SQL,
        {
            "sid": session_id,
            "scope": str(locked["namespace"]),
            "at": created,
            "n": len(items),
            "positions": positions,
            "roles": [i.message.role for i in items],
            "kinds": [i.message.kind for i in items],
            "origins": [i.message.origin for i in items],
            "wires": [i.message.wire for i in items],
            "contents": [Jsonb(codec.message_to_json(i.message)) for i in items],
            "texts": [i.message.text for i in items],
            "hashes": hashes,
            "tokens": [i.token_count for i in items],
            "terms": [tsvector_literal(w) for w in words],
            "lengths": [len(w) for w in words],
        },
    ).fetchall()
    ids = {int(r["position"]): int(r["id"]) for r in rows}
    return [
        StoredMessage(
            id=ids[position],
            session_id=session_id,
            position=position,
            message=item.message,
            content_hash=content_hash,
            token_count=item.token_count,
            created_at=created,
        )
        for position, item, content_hash in zip(positions, items, hashes, strict=True)
    ]


def _set_status(conn: Conn, ids: Sequence[int], status: str) -> int:
    """Change status, keeping the session's message_count and the index in step."""
    changed = 0
    for message_id in ids:
        row = conn.execute(
            "SELECT session_id, status FROM messages WHERE id = %s", (message_id,)
        ).fetchone()
        if row is None or row["status"] == status:
            continue
        delta = int(status != "superseded") - int(row["status"] != "superseded")
        conn.execute("UPDATE messages SET status = %s WHERE id = %s", (status, message_id))
        conn.execute(
            "UPDATE docs SET active = %s WHERE kind = 'message' AND ref = %s",
            (status != "superseded", str(message_id)),
        )
        if delta:
            conn.execute(
                "UPDATE sessions SET message_count = message_count + %s WHERE id = %s",
                (delta, row["session_id"]),
            )
        changed += 1
    return changed


def _filter_sql(flt: SearchFilter, alias: str) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (over the `docs` alias) and its parameters for a search filter."""
    clauses = [f"{alias}.kind = ANY(%(f_kinds)s)"]
    params: dict[str, Any] = {"f_kinds": list(flt.kinds)}
    if flt.scopes is not None:
        clauses.append(f"{alias}.scope = ANY(%(f_scopes)s)")
        params["f_scopes"] = list(flt.scopes)
    if flt.session_id is not None:
        clauses.append(f"{alias}.session_id = %(f_session)s")
        params["f_session"] = flt.session_id
    if flt.fact_roles is not None:
        clauses.append(f"({alias}.kind <> 'fact' OR {alias}.role = ANY(%(f_roles)s))")
        params["f_roles"] = list(flt.fact_roles)
    return " AND ".join(clauses), params


def _session(row: Row) -> Session:
    return Session(
        id=row["id"],
        key=row["key"],
        namespace=row["namespace"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        title=row["title"],
        parent_id=row["parent_id"],
        fork_position=row["fork_position"],
        summary=row["summary"],
        summarized_count=row["summarized_count"],
        metadata=row["metadata"] or {},
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_usd=float(row["cost_usd"]),
        message_count=int(row["message_count"]),
    )


def _stored(row: Row) -> StoredMessage:
    return StoredMessage(
        id=int(row["id"]),
        session_id=row["session_id"],
        position=int(row["position"]),
        message=codec.message_from_json(row["content"]),
        content_hash=row["content_hash"],
        token_count=int(row["token_count"]),
        created_at=row["created_at"],
        status=row["status"],
    )


def _hit(row: Row, score: float) -> Hit:
    return Hit(
        kind=row["kind"],
        ref=row["ref"],
        scope=row["scope"],
        session_id=row["session_id"],
        text=row["text"],
        score=score,
        created_at=row["created_at"],
    )
