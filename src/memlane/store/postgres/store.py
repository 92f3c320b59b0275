"""The PostgreSQL + pgvector backend: one database shared by many proxy replicas.

Same contract as the SQLite file (see `store.base.Store`), built for several
processes on several machines writing at once:

- the schema is migrated at start-up under an advisory lock (`postgres.schema`);
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

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from memlane.store import analysis, codec
from memlane.store.base import (
    SearchFilter,
    Vector,
    check_table,
)
from memlane.store.postgres.connection import POOL_MAX, PostgresConnection, PostgresDb
from memlane.store.postgres.copy import DUMP_SQL, LOADERS, dump_row
from memlane.store.postgres.facts import PostgresFacts
from memlane.store.postgres.index import (
    ensure_vector_index,
    insert_vectors,
)
from memlane.store.postgres.keywords import (
    BM25_B,
    BM25_K1,
    FILL_SQL,
    SEARCH_SQL,
    CollectionStats,
    tsquery_literal,
)
from memlane.store.postgres.messages import PostgresMessages
from memlane.store.postgres.sessions import PostgresSessions
from memlane.store.rows import (
    hit_from_row,
)
from memlane.store.tables import SqlTables
from memlane.types import DocKind, Hit

Row = dict[str, Any]

# The most candidates an HNSW scan visits to fill a filtered result (pgvector's default).
HNSW_MAX_SCAN = 20_000


class PostgresStore(
    PostgresConnection,
    PostgresSessions,
    PostgresMessages,
    PostgresFacts,
    SqlTables[PostgresDb],
):
    """A `Store` over a PostgreSQL database with the pgvector extension."""

    def __init__(self, url: str, *, pool_size: int = POOL_MAX) -> None:
        super().__init__(url, pool_size=pool_size)
        self._indexed_dims: set[int] = set()
        self._stats = CollectionStats()

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
        return [hit_from_row(r, float(r["score"])) for r in rows]

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
        hits = [hit_from_row(r, 1.0 - float(r["distance"])) for r in rows]
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

    # --- whole-store copy -------------------------------------------------------
    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        check_table(table)
        with self._tx() as conn, conn.cursor(name=f"dump_{table}") as cur:
            cur.itersize = 1000
            cur.execute(DUMP_SQL[table])
            for row in cur:
                yield dump_row(table, row)

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        check_table(table)
        if not rows:
            return
        with self._tx() as conn:
            indexed = set(self._indexed_dims)
            LOADERS[table](conn, rows, indexed)
        self._indexed_dims |= indexed


# --- helpers ------------------------------------------------------------------


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
