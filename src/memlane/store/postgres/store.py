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

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from memlane.store import analysis, codec
from memlane.store.base import (
    SearchFilter,
    Vector,
    check_table,
)
from memlane.store.documents import Doc
from memlane.store.meta import SqlMeta
from memlane.store.postgres.connection import POOL_MAX, PostgresConnection, PostgresDb
from memlane.store.postgres.copy import DUMP_SQL, LOADERS, dump_row
from memlane.store.postgres.index import (
    ensure_vector_index,
    index_fact,
    insert_vectors,
    put_doc,
    rebuild_turn_documents,
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
    fact_from_row,
    hit_from_row,
)
from memlane.types import DocKind, Fact, FactRole, Hit

Row = dict[str, Any]

# The most candidates an HNSW scan visits to fill a filtered result (pgvector's default).
HNSW_MAX_SCAN = 20_000


class PostgresStore(PostgresConnection, PostgresSessions, PostgresMessages, SqlMeta[PostgresDb]):
    """A `Store` over a PostgreSQL database with the pgvector extension."""

    def __init__(self, url: str, *, pool_size: int = POOL_MAX) -> None:
        super().__init__(url, pool_size=pool_size)
        self._indexed_dims: set[int] = set()
        self._stats = CollectionStats()

    def _put_doc(self, db: PostgresDb, doc: Doc, document: str | None = None) -> None:
        put_doc(
            db.conn,
            doc.kind,
            doc.ref,
            doc.scope,
            doc.session_id,
            doc.role,
            doc.text,
            doc.created_at,
            active=doc.active,
            document=document,
        )

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
        return fact_from_row(row) if row else None

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
        return [fact_from_row(r) for r in rows]

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

    def count(self, table: str) -> int:
        check_table(table)
        with self._tx() as conn:
            row = conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
        assert row is not None
        return int(row["n"])


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
