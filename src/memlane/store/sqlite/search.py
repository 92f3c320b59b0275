"""Search on SQLite: in-process caches answer, SQL re-checks the winners.

Keyword queries run over an in-process inverted index with FTS5's BM25 scores
(`sqlite.keyword_index`), vector queries over an in-process matrix per scope
(`sqlite.vector_index`); both are refreshed from the file before each query,
so other processes' writes are seen. The best candidates' rows are then read
and held to the filter in SQL, widening the window when rows changed since.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from memlane.store import analysis
from memlane.store.base import SearchFilter, StoreError, Vector
from memlane.store.codec import as_vector, ts_to_text, vector_from_bytes, vector_to_bytes
from memlane.store.filters import conditions, turns_left_out_sql, validity_sql
from memlane.store.rare_terms import Holders, RareQuery, SqlRareTerms, rarest
from memlane.store.rows import Row, hit_from_row
from memlane.store.sql import marks
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.keyword_index import KeywordIndex
from memlane.store.sqlite.vector_index import VectorCache
from memlane.types import DocKind, FactRole, Hit

log = logging.getLogger("memlane.store")

_DOC_COLUMNS = "d.rowid, d.kind, d.ref, d.scope, d.session_id, d.role, d.text, d.created_at"
_ROWS_PER_READ = 500  # rowids bound in one statement


def filter_sql(flt: SearchFilter) -> tuple[str, list[Any]]:
    """The filter as SQL over `docs` d. The unary `+` keeps the planner on the rowid the
    caller drives with (keyword or vector candidates) instead of a (kind, ref) index scan."""
    where, fixed = _fixed_sql(
        tuple(flt.kinds),
        None if flt.scopes is None else tuple(flt.scopes),
        flt.session_id,
        None if flt.fact_roles is None else tuple(flt.fact_roles),
    )
    params = list(fixed)
    if flt.turns_left_out is not None:
        where += " AND " + turns_left_out_sql("d", "?")
        params.append(flt.turns_left_out)
    if flt.valid_at is not None:
        where += " AND " + validity_sql("d", "?")
        params.extend([ts_to_text(flt.valid_at)] * 2)
    return where, params


@lru_cache(maxsize=256)
def _fixed_sql(
    kinds: tuple[DocKind, ...],
    scopes: tuple[str, ...] | None,
    session_id: str | None,
    fact_roles: tuple[FactRole, ...] | None,
) -> tuple[str, tuple[Any, ...]]:
    """The filter's SQL but for the moment, once per filter: a proxy asks with the same
    few again and again, with a new moment each time."""
    flt = SearchFilter(kinds=kinds, scopes=scopes, session_id=session_id, fact_roles=fact_roles)
    where = ["+d.active = 1"]
    params: list[Any] = []
    for condition in conditions(flt):
        clause = f"+d.{condition.column} IN ({marks(condition.values) or 'NULL'})"
        where.append(f"(+d.kind != 'fact' OR {clause})" if condition.facts_only else clause)
        params.extend(condition.values)
    return " AND ".join(where), tuple(params)


class SQLiteSearch(SqlRareTerms[SQLiteDb]):
    _lock: threading.Lock
    _keywords: KeywordIndex
    _caches: dict[str, VectorCache]

    def _start_search(self) -> None:
        self._keywords = KeywordIndex()
        self._caches = {}

    def _catch_up(self) -> None:
        """Index what a write of this process just committed, in the writer's thread: the
        in-process indexes read new documents before each search, and a search on a
        request's path then finds nothing left to read. Best effort: a search that
        finds them behind catches them up itself."""
        try:
            with self._reading() as db:
                if self._keywords.loaded:
                    self._keywords.refresh(db.conn)
                for cache in list(self._caches.values()):
                    cache.refresh(db.conn)
        except (StoreError, sqlite3.Error):
            log.debug("the search indexes did not catch up after a write", exc_info=True)

    def keyword_search(self, query: str, flt: SearchFilter, *, limit: int = 10) -> list[Hit]:
        """BM25 through the in-process keyword index, FTS5's scores."""
        words = analysis.query_terms(query)
        if not words or limit <= 0 or not flt.kinds:
            return []
        if flt.scopes is not None and not flt.scopes:
            return []
        with self._reading() as db:
            self._keywords.refresh(db.conn)
        return self._best(
            flt,
            limit,
            limit + 8,
            lambda fetch: {
                hit.rowid: hit.score for hit in self._keywords.search(words, flt, fetch)
            },
        )

    def _rare_holders(self, query: RareQuery) -> Holders:
        """Through the in-process keyword index; the holders' rows are held to the filter."""
        with self._reading() as db:
            self._keywords.refresh(db.conn)
        held = rarest(self._keywords.holders(query), query.limit)
        rowids = sorted({rowid for found in held.values() for rowid in found})
        where, params = filter_sql(query.flt)
        rows: dict[int, Row] = {}
        with self._reading() as db:
            for first in range(0, len(rowids), _ROWS_PER_READ):
                chunk = rowids[first : first + _ROWS_PER_READ]
                found = db.all(
                    f"SELECT {_DOC_COLUMNS} FROM docs d "
                    f"WHERE d.rowid IN ({marks(chunk)}) AND {where}",
                    *chunk,
                    *params,
                )
                rows.update((r["rowid"], r) for r in found)
        return held, rows

    def vector_search(
        self, vector: Vector, flt: SearchFilter, *, model: str, limit: int = 10
    ) -> list[Hit]:
        query = as_vector(vector, what="query vector")
        if limit <= 0 or not flt.kinds:
            return []
        cache = self._cache(model)
        with self._reading() as db:
            cache.refresh(db.conn)
        return self._best(
            flt,
            limit,
            limit * 4 + 16,
            lambda fetch: {c.doc_id: c.score for c in cache.search(query, flt, fetch)},
        )

    def _best(
        self,
        flt: SearchFilter,
        limit: int,
        fetch: int,
        candidates: Callable[[int], dict[int, float]],
    ) -> list[Hit]:
        """The `limit` best of the `fetch` best candidates (rowid: score) whose rows pass
        the filter, best first; the window widens while rows changed since the cache's
        refresh (or inactive ones) fill it."""
        where, params = filter_sql(flt)
        while True:
            scores = candidates(fetch)
            if not scores:
                return []
            with self._reading() as db:
                rows = db.all(
                    f"SELECT {_DOC_COLUMNS} FROM docs d "
                    f"WHERE d.rowid IN ({marks(scores)}) AND {where}",
                    *scores,
                    *params,
                )
            if len(rows) >= limit or len(scores) < fetch:
                rows.sort(key=lambda r: (-scores[r["rowid"]], r["rowid"]))
                return [hit_from_row(r, scores[r["rowid"]]) for r in rows[:limit]]
            fetch *= 4

    def _cache(self, model: str) -> VectorCache:
        with self._lock:
            cache = self._caches.get(model)
            if cache is None:
                cache = self._caches[model] = VectorCache(model)
            return cache

    def put_vectors(
        self, kind: DocKind, items: Sequence[tuple[str, Vector]], *, model: str
    ) -> None:
        encoded = [(ref, as_vector(v, what=f"vector for {kind} {ref}")) for ref, v in items]
        with self._writing() as db:
            for ref, vector in encoded:
                doc = db.one("SELECT rowid FROM docs WHERE kind = ? AND ref = ?", kind, ref)
                if doc is None:
                    continue  # the document went away while it was being embedded
                db.run(
                    "INSERT OR REPLACE INTO vectors (doc_id, model, dim, vec) VALUES (?, ?, ?, ?)",
                    doc["rowid"],
                    model,
                    int(vector.shape[0]),
                    vector_to_bytes(vector),
                )

    def get_vectors(self, kind: DocKind, refs: Sequence[str], *, model: str) -> dict[str, Vector]:
        if not refs:
            return {}
        with self._reading() as db:
            rows = db.all(
                "SELECT d.ref, v.vec FROM vectors v JOIN docs d ON d.rowid = v.doc_id "
                f"WHERE d.kind = ? AND v.model = ? AND d.ref IN ({marks(refs)})",
                kind,
                model,
                *refs,
            )
        return {r["ref"]: vector_from_bytes(r["vec"]) for r in rows}

    def missing_vectors(
        self, kind: DocKind, *, model: str, limit: int = 1000
    ) -> list[tuple[str, str]]:
        with self._reading() as db:
            rows = db.all(
                "SELECT d.ref, d.text FROM docs d WHERE d.kind = ? AND d.active = 1 "
                "AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.doc_id = d.rowid "
                "AND v.model = ?) ORDER BY d.rowid LIMIT ?",
                kind,
                model,
                limit,
            )
        return [(r["ref"], r["text"]) for r in rows]

    def drop_vectors(self, *, except_model: str) -> int:
        with self._writing() as db:
            dropped = db.run("DELETE FROM vectors WHERE model != ?", except_model)
        with self._lock:
            self._caches = {m: c for m, c in self._caches.items() if m == except_model}
        return dropped
