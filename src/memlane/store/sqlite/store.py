"""The embedded store: one SQLite file in WAL mode, FTS5 for keywords, vectors as BLOBs.

Each thread gets its own connection. Every write is one `BEGIN IMMEDIATE`
transaction, so a writer waits (busy timeout) instead of failing, and a crash
loses at most the transaction in flight. `synchronous=normal` survives a
process crash; `full` also survives power loss. The keyword index is an FTS5
table over the analyser's terms (`store.analysis`); queries run over in-process
caches derived from the file and kept in step with it — BM25 postings
(`sqlite.keyword_index`) and vectors (`sqlite.vector_index`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from memlane.store import analysis
from memlane.store.base import (
    SearchFilter,
    StoreError,
    Vector,
    check_table,
)
from memlane.store.codec import (
    FACT_COLUMNS,
    as_vector,
    dumps,
    fact_to_row,
    now,
    ts_to_text,
    vector_from_bytes,
    vector_from_text,
    vector_to_bytes,
    vector_to_text,
)
from memlane.store.documents import (
    Doc,
)
from memlane.store.meta import SqlMeta
from memlane.store.rows import (
    fact_from_row,
    hit_from_row,
)
from memlane.store.sql import marks
from memlane.store.sqlite.connection import SQLiteConnection, SQLiteDb, explain
from memlane.store.sqlite.index import (
    index_fact,
    one,
    put_doc,
    rebuild_turn_documents,
)
from memlane.store.sqlite.keyword_index import KeywordIndex
from memlane.store.sqlite.messages import SQLiteMessages
from memlane.store.sqlite.sessions import SQLiteSessions
from memlane.store.sqlite.vector_index import VectorCache
from memlane.types import DocKind, Fact, FactRole, Hit

_DOC_COLUMNS = "d.rowid, d.kind, d.ref, d.scope, d.session_id, d.text, d.created_at"


class SQLiteStore(SQLiteConnection, SQLiteSessions, SQLiteMessages, SqlMeta[SQLiteDb]):
    """`Store` over one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: Path, *, synchronous: Literal["normal", "full"] = "normal") -> None:
        super().__init__(path, synchronous=synchronous)
        self._caches: dict[str, VectorCache] = {}
        self._keywords = KeywordIndex()

    def _put_doc(self, db: SQLiteDb, doc: Doc, document: str | None = None) -> None:
        put_doc(
            db.conn,
            doc.kind,
            doc.ref,
            doc.scope,
            doc.session_id,
            doc.role,
            doc.text,
            ts_to_text(doc.created_at),
            active=doc.active,
            document=document,
        )

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
            index_fact(conn, fact)

    def reindex_turns(self, progress: Callable[[int, int], None] | None = None) -> int:
        with self._write() as conn:
            return rebuild_turn_documents(conn, progress)

    def get_fact(self, fact_id: str) -> Fact | None:
        rows = self._read(f"SELECT {', '.join(FACT_COLUMNS)} FROM facts WHERE id = ?", (fact_id,))
        return fact_from_row(rows[0]) if rows else None

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
            where.append(f"role IN ({marks(roles)})")
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
        """BM25 through the in-process keyword index (`sqlite.keyword_index`), FTS5's scores;
        the winners' rows are read (and re-checked against the filter) in SQL."""
        words = analysis.query_terms(query)
        if not words or limit <= 0 or not flt.kinds:
            return []
        if flt.scopes is not None and not flt.scopes:
            return []
        try:
            self._keywords.refresh(self._conn())
        except sqlite3.DatabaseError as exc:
            raise StoreError(explain(self.path, exc)) from None
        where, params = _filter_sql(flt)
        fetch = limit + 8
        while True:
            found = self._keywords.search(words, flt, fetch)
            if not found:
                return []
            scores = {hit.rowid: hit.score for hit in found}
            rows = self._read(
                f"""SELECT {_DOC_COLUMNS} FROM docs d
                    WHERE d.rowid IN ({marks(found)}) AND {where}""",
                [*scores, *params],
            )
            if len(rows) >= limit or len(found) < fetch:
                rows.sort(key=lambda r: (-scores[r["rowid"]], r["rowid"]))
                return [hit_from_row(r, scores[r["rowid"]]) for r in rows[:limit]]
            fetch *= 4  # rows changed since the refresh filled the window: look further

    def put_vectors(
        self, kind: DocKind, items: Sequence[tuple[str, Vector]], *, model: str
    ) -> None:
        encoded = [(ref, as_vector(v, what=f"vector for {kind} {ref}")) for ref, v in items]
        with self._write() as conn:
            for ref, vector in encoded:
                doc = one(conn, "SELECT rowid FROM docs WHERE kind = ? AND ref = ?", kind, ref)
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
            raise StoreError(explain(self.path, exc)) from None
        where, params = _filter_sql(flt)
        fetch = limit * 4 + 16
        while True:
            candidates = cache.search(query, flt, fetch)
            if not candidates:
                return []
            scores = {c.doc_id: c.score for c in candidates}
            rows = self._read(
                f"""SELECT {_DOC_COLUMNS} FROM docs d
                    WHERE d.rowid IN ({marks(candidates)}) AND {where}""",
                [*scores, *params],
            )
            if len(rows) >= limit or len(candidates) < fetch:
                hits = [hit_from_row(r, scores[r["rowid"]]) for r in rows]
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
                WHERE d.kind = ? AND v.model = ? AND d.ref IN ({marks(refs)})""",
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

    # --- whole-store copy -------------------------------------------------------------
    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        check_table(table)
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
        check_table(table)
        with self._write() as conn:
            for row in rows:
                _load_row(conn, table, row)

    def count(self, table: str) -> int:
        check_table(table)
        return int(self._read(f"SELECT count(*) AS n FROM {table}")[0]["n"])


# --- module helpers -----------------------------------------------------------------


def _filter_sql(flt: SearchFilter) -> tuple[str, list[Any]]:
    """The filter as SQL over `docs d`. The unary `+` keeps the planner on the rowid the
    caller drives with (FTS match or vector candidates) instead of a (kind, ref) index scan."""
    where = [f"+d.active = 1 AND +d.kind IN ({marks(flt.kinds)})"]
    params: list[Any] = list(flt.kinds)
    if flt.scopes is not None:
        where.append(f"+d.scope IN ({marks(flt.scopes)})" if flt.scopes else "0")
        params.extend(flt.scopes)
    if flt.session_id is not None:
        where.append("+d.session_id = ?")
        params.append(flt.session_id)
    if flt.fact_roles is not None:
        where.append(f"(+d.kind != 'fact' OR +d.role IN ({marks(flt.fact_roles) or 'NULL'}))")
        params.extend(flt.fact_roles)
    return " AND ".join(where), params


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
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks(names)})",
        [values[n] for n in names],
    )
    if table == "messages" and values["text"]:
        namespace = one(conn, "SELECT namespace FROM sessions WHERE id = ?", values["session_id"])
        scope = namespace["namespace"] if namespace is not None else ""
        active = values.get("status", "ok") != "superseded"
        put_doc(
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
        namespace = one(conn, "SELECT namespace FROM sessions WHERE id = ?", values["session_id"])
        scope = namespace["namespace"] if namespace is not None else ""
        put_doc(
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
        index_fact(conn, fact_from_row(values))


def _load_vector(conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
    doc = one(conn, "SELECT rowid FROM docs WHERE kind = ? AND ref = ?", row["kind"], row["ref"])
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
