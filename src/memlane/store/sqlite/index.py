"""The SQLite search documents: one `docs` row per searchable text, with its FTS5 row.

The documents are derived from the stored rows (messages, events, facts). Their
`terms` are the shared analyser's terms (`store.analysis`), joined for FTS5;
their `tags` put scope, session and kind filters into the FTS5 match
(`schema.doc_tags`).
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memlane.store import analysis
from memlane.store.codec import FACT_COLUMNS, ts_to_text
from memlane.store.documents import (
    AFTER,
    BEFORE,
    TURN_ROLES,
    is_turn,
    turn_document,
    turn_documents,
)
from memlane.store.rows import fact_from_row
from memlane.store.sql import marks
from memlane.store.sqlite.schema import doc_tags
from memlane.types import Fact

_INSERT_DOC = """INSERT INTO docs
    (rowid, kind, ref, scope, session_id, role, text, terms, created_at, active, tags)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


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


def insert_docs(conn: sqlite3.Connection, docs: Sequence[tuple[Any, ...]]) -> list[int]:
    """Insert new documents and their FTS rows; return their rowids.

    Rows are (kind, ref, scope, session_id, role, text, terms, created_at,
    active, tags). The FTS rows are written here rather than by a trigger: a
    trigger makes FTS5 inserts about 2.5 times slower. Called inside a write
    transaction, so the next AUTOINCREMENT ids are ours to hand out.
    """
    if not docs:
        return []
    first = next_id(conn, "docs") + 1
    rowids = list(range(first, first + len(docs)))
    conn.executemany(_INSERT_DOC, [(rowid, *doc) for rowid, doc in zip(rowids, docs, strict=True)])
    conn.executemany(
        "INSERT INTO docs_fts (rowid, terms, tags) VALUES (?, ?, ?)",
        [(rowid, doc[6], doc[9]) for rowid, doc in zip(rowids, docs, strict=True)],
    )
    return rowids


def next_id(conn: sqlite3.Connection, table: str) -> int:
    """The last id an AUTOINCREMENT table handed out (the next one is this + 1)."""
    row = conn.execute(
        f"""SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),
            coalesce((SELECT max(rowid) FROM {table}), 0))"""
    ).fetchone()
    return int(row[0])


def one(conn: sqlite3.Connection, sql: str, *params: Any) -> sqlite3.Row | None:
    cursor = conn.execute(sql, params)
    cursor.row_factory = sqlite3.Row
    row: sqlite3.Row | None = cursor.fetchone()
    return row


def put_doc(
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
    old = one(
        conn, "SELECT rowid, text, terms, tags FROM docs WHERE kind = ? AND ref = ?", kind, ref
    )
    terms = index_terms(text if document is None else document)
    tags = doc_tags(kind, scope, session_id)
    if old is None:
        insert_docs(
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


def index_fact(conn: sqlite3.Connection, fact: Fact, *, neighbours: bool = True) -> None:
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
                index_fact(conn, other, neighbours=False)
    put_doc(
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
            WHERE deleted = 0 AND role IN ({marks(TURN_ROLES)})
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
              AND role IN ({marks(TURN_ROLES)}) AND created_at {direction} ?
            ORDER BY created_at {order} LIMIT ?""",
        [fact.conversation_id, fact.scope, *TURN_ROLES, ts_to_text(fact.created_at), limit],
    ).fetchall()
    return [fact_from_row(dict(zip(FACT_COLUMNS, r, strict=True))) for r in rows]


def copy_doc(
    conn: sqlite3.Connection, kind: str, old_ref: str, new_ref: str, session_id: str
) -> None:
    """Index a copied document under its new ref, reusing its vectors (no re-embedding)."""
    source = one(
        conn,
        "SELECT scope, role, text, terms, created_at, active FROM docs WHERE kind = ? AND ref = ?",
        kind,
        old_ref,
    )
    if source is None:
        return
    (doc_id,) = insert_docs(
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
