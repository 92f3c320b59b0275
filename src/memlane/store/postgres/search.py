"""Search on PostgreSQL: BM25 over the `tsvector` index, cosine over HNSW indexes.

Keyword ranking is BM25 with the collection's statistics (`postgres.keywords`),
so scores agree with SQLite's; vector search is pgvector's cosine distance
over a partial HNSW index per dimension, created on first use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memlane.store import analysis, bm25, codec
from memlane.store.base import SearchFilter, Vector
from memlane.store.filters import conditions, turns_left_out_sql, validity_sql
from memlane.store.postgres.db import PostgresDb
from memlane.store.postgres.index import ensure_vector_index, insert_vectors
from memlane.store.postgres.keywords import (
    FILL_SQL,
    RARE_SQL,
    SEARCH_AND_FILL_SQL,
    SEARCH_SQL,
    VISIBLE_SQL,
    CollectionStats,
    QueryWeights,
    tsquery_literal,
)
from memlane.store.rare_terms import Holders, RareQuery, SqlRareTerms, rare_bound, rarest
from memlane.store.rows import hit_from_row
from memlane.types import DocKind, Hit

# The most candidates an HNSW scan visits to fill a filtered result (pgvector's default).
HNSW_MAX_SCAN = 20_000


def filter_sql(flt: SearchFilter, alias: str) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (over the `docs` alias) and its parameters for a search filter."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for condition in conditions(flt):
        key = f"f_{condition.column}"
        if condition.one is not None:
            clause = f"{alias}.{condition.column} = %({key})s"
            params[key] = condition.one
        else:
            clause = f"{alias}.{condition.column} = ANY(%({key})s)"
            params[key] = list(condition.values)
        clauses.append(f"({alias}.kind <> 'fact' OR {clause})" if condition.facts_only else clause)
    if flt.turns_left_out is not None:
        clauses.append(turns_left_out_sql(alias, "%(turns_left_out)s"))
        params["turns_left_out"] = flt.turns_left_out
    if flt.valid_at is not None:
        clauses.append(validity_sql(alias, "%(valid_at)s"))
        params["valid_at"] = flt.valid_at
    return " AND ".join(clauses), params


def _keyword_sql(weights: QueryWeights) -> str:
    """Ranked by the informative words, with the places they leave empty filled by the
    newest documents that have a common one; or only filled, when every word is common."""
    if not weights.match:
        return FILL_SQL
    if len(weights.match) < len(weights.words):
        return SEARCH_AND_FILL_SQL
    return SEARCH_SQL


class PostgresSearch(SqlRareTerms[PostgresDb]):
    _indexed_dims: set[int]
    """Dimensions known to have their HNSW index in this database."""
    _stats: CollectionStats

    def _start_search(self) -> None:
        self._indexed_dims = set()
        self._stats = CollectionStats()

    def keyword_search(self, query: str, flt: SearchFilter, *, limit: int = 10) -> list[Hit]:
        words = analysis.query_terms(query)
        if not words or limit <= 0 or not flt.kinds:
            return []
        where, params = filter_sql(flt, "d")
        with self._reading() as db:
            conn = db.conn
            weights = self._stats.weigh(conn, words)
            params.update(
                terms=weights.words,
                idf=weights.idf,
                any=tsquery_literal(weights.match),
                every=tsquery_literal(weights.words),
                avgdl=weights.avgdl,
                k1=bm25.K1,
                b=bm25.B,
                limit=limit,
            )
            sql = _keyword_sql(weights)
            rows = conn.execute(sql.format(where=where), params).fetchall()
        return [hit_from_row(r, float(r["score"])) for r in rows]

    def _rare_holders(self, query: RareQuery) -> Holders:
        max_df = query.max_df
        where, params = filter_sql(query.flt, "d")
        with self._reading() as db:
            conn = db.conn
            if query.max_share < 1.0:  # count the visible documents, as far as the bound can move
                share = query.max_share
                params["enough"] = math.ceil(max_df / share) if share > 0 else 0
                row = conn.execute(VISIBLE_SQL.format(where=where), params).fetchone()
                max_df = rare_bound(max_df, share, int(row["n"]) if row else 0)
            if max_df < 2:
                return {}, {}  # a word only its seed holds links nothing
            terms = list(query.words)
            params.update(
                words=terms, queries=[tsquery_literal([w]) for w in terms], cap=max_df + 1
            )
            rows = conn.execute(RARE_SQL.format(where=where), params).fetchall()
        held: dict[str, list[int]] = {}
        for row in rows:
            held.setdefault(row["word"], []).append(row["seq"])
        rare = {word: sorted(seqs) for word, seqs in held.items() if len(seqs) <= max_df}
        return rarest(rare, query.limit), {row["seq"]: row for row in rows}

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
        with self._writing() as db:
            conn = db.conn
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
        where, params = filter_sql(flt, "d")
        params.update(model=model, q=query.tolist(), limit=limit)
        # The dimension is inlined (an int) so the planner can use that dimension's index.
        distance = f"v.embedding::vector({dim}) <=> %(q)s::real[]::vector({dim})"
        sql = f"""
            SELECT d.kind, d.ref, d.scope, d.session_id, d.role, d.text, d.created_at,
                   {distance} AS distance
            FROM vectors v JOIN docs d ON d.kind = v.kind AND d.ref = v.ref
            WHERE v.model = %(model)s AND v.dim = {dim} AND d.active AND {where}
            ORDER BY distance
            LIMIT %(limit)s
        """
        with self._reading() as db:
            conn = db.conn
            # A filtered HNSW scan keeps going until `limit` rows pass the filter.
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN}")
            rows = conn.execute(sql, params).fetchall()
        hits = [hit_from_row(r, 1.0 - float(r["distance"])) for r in rows]
        return sorted(hits, key=lambda h: -h.score)

    def get_vectors(self, kind: DocKind, refs: Sequence[str], *, model: str) -> dict[str, Vector]:
        if not refs:
            return {}
        with self._reading() as db:
            conn = db.conn
            rows = conn.execute(
                "SELECT ref, embedding::real[] AS vec FROM vectors "
                "WHERE kind = %s AND model = %s AND ref = ANY(%s)",
                (kind, model, list(refs)),
            ).fetchall()
        return {r["ref"]: np.asarray(r["vec"], dtype=np.float32) for r in rows}

    def missing_vectors(
        self, kind: DocKind, *, model: str, limit: int = 1000
    ) -> list[tuple[str, str]]:
        with self._reading() as db:
            conn = db.conn
            rows = conn.execute(
                "SELECT d.ref, d.text FROM docs d WHERE d.kind = %s AND d.active AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.kind = d.kind AND v.ref = d.ref "
                "AND v.model = %s) ORDER BY d.seq LIMIT %s",
                (kind, model, limit),
            ).fetchall()
        return [(r["ref"], r["text"]) for r in rows]

    def drop_vectors(self, *, except_model: str) -> int:
        with self._writing() as db:
            conn = db.conn
            cur = conn.execute("DELETE FROM vectors WHERE model <> %s", (except_model,))
            return cur.rowcount
