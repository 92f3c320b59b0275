"""The SQLite search documents: one `docs` row per searchable text.

The documents are derived from the stored rows (events, facts, session summaries). Their
`terms` are the shared analyser's terms (`store.analysis`), joined by spaces: the
in-process keyword index (`sqlite.keyword_index`) reads them. `tags`
(`tags.doc_tags`) only count in a document's length.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any

from memlane.store import analysis
from memlane.store.codec import ts_to_text
from memlane.store.documents import Doc
from memlane.store.facts import SqlFacts, rebuild_turns
from memlane.store.rows import Row
from memlane.store.sessions import index_summaries
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.tags import doc_tags

_INSERT_DOC = """INSERT INTO docs
    (rowid, kind, ref, scope, session_id, role, text, terms, created_at, active, tags)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


index_terms = analysis.term_string
"""`analysis.terms(text)` joined by spaces (memoised per chunk: `analysis.term_string`)."""

LINES_KEPT = 2_048
"""Lines whose terms `document_terms` remembers (a conversation's latest turns)..."""
LINE_CHARS_KEPT = 4_096
"""...each up to this long: at most 8 MB of lines and their terms."""


def document_terms(document: str) -> str:
    """`index_terms(document)`, a line at a time, each line's terms remembered.

    A turn's document holds its own text twice and its neighbours' (`documents.
    context_document`, one per line): a batch of a conversation's turns indexed
    together analyses each turn's text in five documents, and each document again
    when a later turn becomes its neighbour. A line's terms are those of its
    whitespace-separated chunks, as the whole document's are, so joining the lines'
    terms gives the same string."""
    return " ".join(filter(None, map(_line_terms, document.split("\n"))))


def _line_terms(line: str) -> str:
    return _kept_line_terms(line) if len(line) <= LINE_CHARS_KEPT else index_terms(line)


@functools.lru_cache(maxsize=LINES_KEPT)
def _kept_line_terms(line: str) -> str:
    return index_terms(line)


def insert_docs(
    conn: sqlite3.Connection, docs: Sequence[tuple[Any, ...]], *, last: int | None = None
) -> list[int]:
    """Insert new documents; return their rowids.

    Rows are (kind, ref, scope, session_id, role, text, terms, created_at,
    active, tags). Called inside a write transaction, so the next AUTOINCREMENT
    ids are ours to hand out (and `doc_vectors` rows can be written beside);
    `last`: the last one handed out, when the caller read it already (`last_ids`).
    """
    if not docs:
        return []
    first = (next_id(conn, "docs") if last is None else last) + 1
    rowids = list(range(first, first + len(docs)))
    conn.executemany(_INSERT_DOC, [(rowid, *doc) for rowid, doc in zip(rowids, docs, strict=True)])
    return rowids


def _last_id(table: str) -> str:
    return f"""max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),
            coalesce((SELECT max(rowid) FROM {table}), 0))"""


def next_id(conn: sqlite3.Connection, table: str) -> int:
    """The last id an AUTOINCREMENT table handed out (the next one is this + 1)."""
    return last_ids(conn, table)[0]


def last_ids(conn: sqlite3.Connection, *tables: str) -> tuple[int, ...]:
    """`next_id` of each table, in one statement."""
    row = conn.execute(f"SELECT {', '.join(_last_id(table) for table in tables)}").fetchone()
    return tuple(int(value) for value in row)


def doc_row(doc: Doc, document: str | None = None) -> tuple[Any, ...]:
    """A new document as `insert_docs` takes it (`document`: what the index reads)."""
    terms = index_terms(doc.text) if document is None else document_terms(document)
    return (
        *doc.identity,
        terms,
        ts_to_text(doc.created_at),
        int(doc.active),
        doc_tags(doc.kind, doc.scope, doc.session_id),
    )


def put_doc(db: SQLiteDb, doc: Doc, document: str | None = None) -> None:
    """Insert or refresh one search document; a changed text drops its stale vectors.

    `document` is what the keyword index reads when it is more than the text (a
    turn with its neighbours); the text is still what a hit shows.
    """
    put_docs(db, [(doc, document)])


def put_docs(db: SQLiteDb, docs: Sequence[tuple[Doc, str | None]]) -> None:
    """`put_doc` for many documents at once: one read of those indexed already, one insert
    of the new ones (a remembered exchange: a statement or three, not three a document).
    A document given twice is put as its last."""
    last: dict[tuple[str, str], tuple[Doc, str | None]] = {
        (doc.kind, doc.ref): (doc, document) for doc, document in docs
    }
    indexed = _indexed(db, list(last))
    new = [doc_row(doc, document) for key, (doc, document) in last.items() if key not in indexed]
    insert_docs(db.conn, new)
    for key, old in indexed.items():
        _refresh(db, old, *last[key])


_INDEXED = "SELECT rowid, kind, ref, scope, session_id, role, created_at, active, text, terms, tags"


def _indexed(db: SQLiteDb, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Row]:
    """The `docs` rows of these (kind, ref) keys that exist."""
    found: dict[tuple[str, str], Row] = {}
    refs: dict[str, list[str]] = {}
    for kind, ref in keys:
        refs.setdefault(kind, []).append(ref)
    for kind, of_kind in refs.items():
        for first in range(0, len(of_kind), 500):  # SQLite bounds a statement's parameters
            chunk = of_kind[first : first + 500]
            for row in db.all(
                f"{_INDEXED} FROM docs WHERE kind = ? AND ref IN ({', '.join('?' * len(chunk))})",
                kind,
                *chunk,
            ):
                found[(row["kind"], row["ref"])] = row
    return found


def _refresh(db: SQLiteDb, old: Row, doc: Doc, document: str | None) -> None:
    """Bring an indexed document in line with `doc`, writing only the columns that differ."""
    terms = index_terms(doc.text) if document is None else document_terms(document)
    tags = doc_tags(doc.kind, doc.scope, doc.session_id)
    stamp = ts_to_text(doc.created_at)
    where = old["rowid"]
    placed = (doc.scope, doc.session_id, doc.role, stamp, int(doc.active))
    if placed != (old["scope"], old["session_id"], old["role"], old["created_at"], old["active"]):
        db.run(
            "UPDATE docs SET scope = ?, session_id = ?, role = ?, created_at = ?, active = ? "
            "WHERE rowid = ?",
            *placed,
            where,
        )
    if old["tags"] != tags:
        db.run("UPDATE docs SET tags = ? WHERE rowid = ?", tags, where)
    if old["text"] != doc.text or old["terms"] != terms:
        db.run("UPDATE docs SET text = ?, terms = ? WHERE rowid = ?", doc.text, terms, where)
    if old["text"] != doc.text:
        db.run("DELETE FROM vectors WHERE doc_id = ?", where)


def retext_turn(db: SQLiteDb, ref: str, document: str) -> int:
    """Replace a turn document's terms (see `store.facts.rebuild_turns`)."""
    terms = document_terms(document)
    return db.run(
        "UPDATE docs SET terms = ? WHERE kind = 'fact' AND ref = ? AND terms != ?",
        terms,
        ref,
        terms,
    )


def rebuild_turn_documents(conn: sqlite3.Connection) -> int:
    """Index every live turn again with its neighbours (migration m005)."""
    return rebuild_turns(SQLiteDb(conn), retext_turn)


def index_session_summaries(conn: sqlite3.Connection) -> int:
    """Index every session's summary as a document of its namespace (migration m010)."""
    return index_summaries(SQLiteDb(conn), put_doc)


class SQLiteFacts(SqlFacts[SQLiteDb]):
    """The facts role (`store.facts`) with this backend's documents."""

    _put_doc = staticmethod(put_doc)
    _put_docs = staticmethod(put_docs)
    _retext_turn = staticmethod(retext_turn)
