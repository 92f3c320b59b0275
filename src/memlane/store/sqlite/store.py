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

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from memlane.store import analysis
from memlane.store.base import (
    SearchFilter,
    StoreError,
    Vector,
)
from memlane.store.codec import (
    as_vector,
    vector_from_bytes,
    vector_to_bytes,
)
from memlane.store.rows import (
    hit_from_row,
)
from memlane.store.sql import marks
from memlane.store.sqlite.connection import SQLiteConnection, SQLiteDb, explain
from memlane.store.sqlite.copy import SQLiteCopy
from memlane.store.sqlite.facts import SQLiteFacts
from memlane.store.sqlite.keyword_index import KeywordIndex
from memlane.store.sqlite.messages import SQLiteMessages
from memlane.store.sqlite.sessions import SQLiteSessions
from memlane.store.sqlite.vector_index import VectorCache
from memlane.store.tables import SqlTables
from memlane.types import DocKind, Hit

_DOC_COLUMNS = "d.rowid, d.kind, d.ref, d.scope, d.session_id, d.text, d.created_at"


class SQLiteStore(
    SQLiteConnection, SQLiteSessions, SQLiteMessages, SQLiteFacts, SQLiteCopy, SqlTables[SQLiteDb]
):
    """`Store` over one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: Path, *, synchronous: Literal["normal", "full"] = "normal") -> None:
        super().__init__(path, synchronous=synchronous)
        self._caches: dict[str, VectorCache] = {}
        self._keywords = KeywordIndex()

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
                doc = conn.execute(
                    "SELECT rowid FROM docs WHERE kind = ? AND ref = ?", (kind, ref)
                ).fetchone()
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
