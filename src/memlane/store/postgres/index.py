"""The PostgreSQL search index: one `docs` row per searchable text, and its vectors.

Both are derived from the stored rows (messages, events, facts), never dumped,
and rebuilt when a store is loaded. A document's `tsvector` holds the shared
analyser's terms (`postgres.keywords`); its vectors sit in one `vector` column
of any dimension, with a partial HNSW index (cosine) per dimension.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from memlane.store import analysis
from memlane.store.base import Vector
from memlane.store.documents import Doc
from memlane.store.facts import SqlFacts, rebuild_turns
from memlane.store.postgres.advisory import LOCK_CLASS, VECTOR_INDEX_LOCK
from memlane.store.postgres.db import PostgresDb
from memlane.store.postgres.keywords import tsvector_literal
from memlane.store.sessions import index_summaries

Conn = psycopg.Connection[dict[str, Any]]

# pgvector indexes `vector` columns up to this dimension; above it, search is exact.
HNSW_MAX_DIM = 2_000


_NEW_DOCS = """
    SELECT * FROM unnest(
        %(kinds)b::text[], %(refs)b::text[], %(scopes)b::text[], %(sessions)b::text[],
        %(roles)b::text[], %(texts)b::text[], %(terms)b::text[], %(lengths)b::int[],
        %(times)b::timestamptz[], %(active)b::bool[]
    ) AS n(kind, ref, scope, session_id, role, text, terms, length, created_at, active)
"""

_DROP_STALE_VECTORS = f"""
    WITH n AS ({_NEW_DOCS}),
    changed AS (
        SELECT d.kind, d.ref FROM docs d JOIN n ON d.kind = n.kind AND d.ref = n.ref
        WHERE d.text IS DISTINCT FROM n.text
        FOR UPDATE OF d
    )
    DELETE FROM vectors v USING changed c WHERE v.kind = c.kind AND v.ref = c.ref
"""
"""The vectors of documents whose text changes, their rows locked first. A statement of its
own: in the upsert's, a row the upsert changed is one its `FOR UPDATE` skips."""

_UPSERT_DOCS = f"""
    INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, created_at, active)
    SELECT kind, ref, scope, session_id, role, text, terms::tsvector, length, created_at, active
    FROM ({_NEW_DOCS}) AS n
    ON CONFLICT (kind, ref) DO UPDATE SET scope = excluded.scope,
        session_id = excluded.session_id, role = excluded.role, text = excluded.text,
        terms = excluded.terms, length = excluded.length, created_at = excluded.created_at,
        active = excluded.active
"""


def put_doc(db: PostgresDb, doc: Doc, document: str | None = None) -> None:
    """Insert or refresh one search document; a changed text drops its stale vectors.

    `document` is what the keyword index reads when it is more than the text (a turn
    with its neighbours, `store.documents`); the text is still what a hit shows.
    """
    put_docs(db, [(doc, document)])


def put_docs(db: PostgresDb, docs: Sequence[tuple[Doc, str | None]]) -> None:
    """`put_doc` for many documents in two statements: a remembered turn writes its two
    entries and re-indexes their neighbours, and one by one each took three round trips
    (its row locked and read, its stale vectors dropped, the row written)."""
    latest = {(doc.kind, doc.ref): (doc, document) for doc, document in docs}  # once each
    if not latest:
        return
    words = [
        analysis.terms(doc.text if document is None else document)
        for doc, document in latest.values()
    ]
    chosen = [doc for doc, _ in latest.values()]
    columns = {
        "kinds": [d.kind for d in chosen],
        "refs": [d.ref for d in chosen],
        "scopes": [d.scope for d in chosen],
        "sessions": [d.session_id for d in chosen],
        "roles": [d.role for d in chosen],
        "texts": [d.text for d in chosen],
        "terms": [tsvector_literal(w) for w in words],
        "lengths": [len(w) for w in words],
        "times": [d.created_at for d in chosen],
        "active": [d.active for d in chosen],
    }
    db.conn.execute(_DROP_STALE_VECTORS, columns)
    db.conn.execute(_UPSERT_DOCS, columns)


def insert_docs(conn: Conn, docs: Sequence[Doc]) -> None:
    """Index new documents in one statement (a turn, or a batch of a store copy)."""
    if not docs:
        return
    words = [analysis.terms(doc.text) for doc in docs]
    conn.execute(
        "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, created_at, "
        "active) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::tsvector[], %s::int[], %s::timestamptz[], %s::bool[])",
        (
            [d.kind for d in docs],
            [d.ref for d in docs],
            [d.scope for d in docs],
            [d.session_id for d in docs],
            [d.role for d in docs],
            [d.text for d in docs],
            [tsvector_literal(w) for w in words],
            [len(w) for w in words],
            [d.created_at for d in docs],
            [d.active for d in docs],
        ),
    )


def retext_turn(db: PostgresDb, ref: str, document: str) -> int:
    """Replace a turn document's terms (see `store.facts.rebuild_turns`)."""
    words = tsvector_literal(analysis.terms(document))
    return db.conn.execute(
        "UPDATE docs SET terms = %s::tsvector, length = %s "
        "WHERE kind = 'fact' AND ref = %s AND terms IS DISTINCT FROM %s::tsvector",
        (words, len(analysis.terms(document)), ref, words),
    ).rowcount


def rebuild_turn_documents(conn: psycopg.Connection[Any]) -> int:
    """Index every live turn again with its neighbours (migration m002)."""
    return rebuild_turns(PostgresDb(conn), retext_turn)


def vector_text(vector: Vector) -> str:
    return "[" + ",".join(map(repr, vector.tolist())) + "]"


def insert_vectors(conn: Conn, kind: str, model: str, vectors: Mapping[str, Vector]) -> None:
    """Upsert the vectors of documents that exist, in one statement."""
    conn.execute(
        "INSERT INTO vectors (kind, ref, model, dim, embedding) "
        "SELECT d.kind, d.ref, %s, x.dim, x.vec::vector "
        "FROM unnest(%s::text[], %s::int[], %s::text[]) AS x(ref, dim, vec) "
        "JOIN docs d ON d.kind = %s AND d.ref = x.ref "
        "ON CONFLICT (kind, ref, model) DO UPDATE "
        "SET dim = excluded.dim, embedding = excluded.embedding",
        (
            model,
            list(vectors),
            [int(v.shape[0]) for v in vectors.values()],
            [vector_text(v) for v in vectors.values()],
            kind,
        ),
    )


def group_vectors(
    rows: Sequence[tuple[str, str, str, Vector]],
) -> dict[tuple[str, str], dict[str, Vector]]:
    groups: dict[tuple[str, str], dict[str, Vector]] = {}
    for kind, ref, model, vector in rows:
        groups.setdefault((kind, model), {})[ref] = vector
    return groups


def ensure_vector_index(conn: Conn, dim: int) -> None:
    """An HNSW (cosine) index over the vectors of one dimension, made once per database."""
    if dim > HNSW_MAX_DIM:
        return
    name = f"vectors_hnsw_{dim}"
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (name,)).fetchone()
    if found is not None and found["found"]:
        return  # the usual case: no table lock taken
    # Replicas adding the same index at once would collide in the catalog: take turns.
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, VECTOR_INDEX_LOCK))
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {name} ON vectors "
        f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
    )


class PostgresFacts(SqlFacts[PostgresDb]):
    """The facts role (`store.facts`) with this backend's documents."""

    _put_doc = staticmethod(put_doc)
    _put_docs = staticmethod(put_docs)
    _retext_turn = staticmethod(retext_turn)


def index_session_summaries(conn: psycopg.Connection[Any]) -> int:
    """Index every session's summary as a document of its namespace (migration m007)."""
    return index_summaries(PostgresDb(conn), put_doc)
