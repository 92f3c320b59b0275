"""The PostgreSQL search index: one `docs` row per searchable text, and its vectors.

Both are derived from the stored rows (messages, events, facts), never dumped,
and rebuilt when a store is loaded. A document's `tsvector` holds the shared
analyser's terms (`postgres.keywords`); its vectors sit in one `vector` column
of any dimension, with a partial HNSW index (cosine) per dimension.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memlane.store import analysis
from memlane.store.base import Vector
from memlane.store.codec import FACT_COLUMNS
from memlane.store.documents import (
    AFTER,
    BEFORE,
    TURN_ROLES,
    Doc,
    is_turn,
    turn_document,
    turn_documents,
)
from memlane.store.postgres.keywords import tsvector_literal
from memlane.store.postgres.schema import LOCK_CLASS, VECTOR_INDEX_LOCK
from memlane.store.rows import fact_from_row
from memlane.types import DocKind, Fact

Conn = psycopg.Connection[dict[str, Any]]

# pgvector indexes `vector` columns up to this dimension; above it, search is exact.
HNSW_MAX_DIM = 2_000


def put_doc(
    conn: Conn,
    kind: DocKind,
    ref: str,
    scope: str,
    session_id: str | None,
    role: str | None,
    text: str,
    created_at: datetime,
    *,
    active: bool = True,
    document: str | None = None,
) -> None:
    """Insert or refresh one search document; a changed text drops its stale vectors.

    `document` is what the keyword index reads when it is more than the text (a turn
    with its neighbours, `store.documents`); the text is still what a hit shows.
    """
    words = analysis.terms(text if document is None else document)
    old = conn.execute(
        "SELECT text FROM docs WHERE kind = %s AND ref = %s FOR UPDATE", (kind, ref)
    ).fetchone()
    if old is not None and old["text"] != text:
        conn.execute("DELETE FROM vectors WHERE kind = %s AND ref = %s", (kind, ref))
    conn.execute(
        "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, length, created_at, "
        "active) VALUES (%s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s, %s) "
        "ON CONFLICT (kind, ref) DO UPDATE SET scope = excluded.scope, "
        "session_id = excluded.session_id, role = excluded.role, text = excluded.text, "
        "terms = excluded.terms, length = excluded.length, created_at = excluded.created_at, "
        "active = excluded.active",
        (
            kind,
            ref,
            scope,
            session_id,
            role,
            text,
            tsvector_literal(words),
            len(words),
            created_at,
            active,
        ),
    )


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


def index_fact(conn: Conn, fact: Fact, *, neighbours: bool = True) -> None:
    """A fact is indexed under its conversation; a tombstone stays, inactive, with its vectors.

    A turn is indexed with its neighbours, and the turns whose neighbourhood now holds it
    are indexed again (the one before it; those after it, when it came late).
    """
    document = None
    if is_turn(fact):
        before = _turns(conn, fact, "<", BEFORE)
        after = _turns(conn, fact, ">", BEFORE)
        document = turn_document(
            fact, [t.text for t in reversed(before)], [t.text for t in after[:AFTER]]
        )
        if neighbours:
            for other in (*before[:AFTER], *after[:BEFORE]):
                index_fact(conn, other, neighbours=False)
    put_doc(
        conn,
        "fact",
        fact.id,
        fact.scope,
        fact.conversation_id,
        fact.role,
        fact.text,
        fact.created_at,
        active=not fact.deleted,
        document=document,
    )


def rebuild_turn_documents(
    conn: psycopg.Connection[Any],
    progress: Callable[[int, int], None] | None = None,
    *,
    conversations: Sequence[str] | None = None,
) -> int:
    """Index live turns again with their neighbours (a migration, a load, `memory
    reindex`), all of them or those of `conversations`; returns how many changed."""
    only = "" if conversations is None else "AND conversation_id = ANY(%s) "
    params: list[Any] = [list(TURN_ROLES)] + (
        [] if conversations is None else [list(conversations)]
    )
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            f"SELECT {', '.join(FACT_COLUMNS)} FROM facts WHERE NOT deleted AND role = ANY(%s) "
            f"{only}ORDER BY scope, conversation_id, created_at, seq",
            params,
        ).fetchall()
    facts = [fact_from_row(r) for r in rows]
    changed = 0
    done = 0
    for _, group in itertools.groupby(facts, key=lambda f: (f.scope, f.conversation_id)):
        turns = list(group)
        for ref, document in turn_documents(turns).items():
            words = analysis.terms(document)
            cursor = conn.execute(
                "UPDATE docs SET terms = %s::tsvector, length = %s "
                "WHERE kind = 'fact' AND ref = %s AND terms IS DISTINCT FROM %s::tsvector",
                (tsvector_literal(words), len(words), ref, tsvector_literal(words)),
            )
            changed += cursor.rowcount
        done += len(turns)
        if progress is not None:
            progress(done, len(facts))
    return changed


def _turns(conn: Conn, fact: Fact, direction: str, limit: int) -> list[Fact]:
    """The live turns of `fact`'s conversation just before ("<") or after (">") it, nearest
    first."""
    order = "DESC" if direction == "<" else "ASC"
    rows = conn.execute(
        f"SELECT {', '.join(FACT_COLUMNS)} FROM facts WHERE conversation_id = %s "
        f"AND scope = %s AND NOT deleted AND role = ANY(%s) AND created_at {direction} %s "
        f"ORDER BY created_at {order}, seq {order} LIMIT %s",
        (fact.conversation_id, fact.scope, list(TURN_ROLES), fact.created_at, limit),
    ).fetchall()
    return [fact_from_row(r) for r in rows]


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
