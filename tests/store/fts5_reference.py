"""FTS5's own BM25 over a store's documents: what the in-process keyword index is held to.

The store keeps no FTS5 index since m011. This builds one, in memory, over a copy of
a file's `docs` rows, with the columns and tokenizer the store's index had, so a
test can compare every score and the order against SQLite's own `bm25()`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memlane.store import analysis
from memlane.store.sqlite.schema import FTS_TOKENIZER

Ranking = list[tuple[str, float]]


class Fts5Reference:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def ranking(self, query: str, limit: int, scopes: Sequence[str] | None = None) -> Ranking:
        """The active documents FTS5 ranks for `query` (ties in rowid order, as it scans)."""
        words = analysis.query_terms(query)
        match = "terms: (" + " OR ".join(f'"{w}"' for w in words) + ")"
        in_scopes = f"AND d.scope IN ({', '.join('?' for _ in scopes)})" if scopes else ""
        rows = self._conn.execute(
            f"""SELECT d.rowid, d.ref, -bm25(docs_fts, 1.0, 0.0) FROM docs_fts
                JOIN docs d ON d.rowid = docs_fts.rowid
                WHERE docs_fts MATCH ? AND d.active = 1 {in_scopes}""",
            (match, *(scopes or ())),
        ).fetchall()
        rows.sort(key=lambda r: (-r[2], r[0]))
        return [(ref, round(score, 9)) for _, ref, score in rows[:limit]]

    def common_terms(self, count: int) -> list[str]:
        """Terms of the stored documents, most frequent first: queries that match something."""
        rows = self._conn.execute(
            "SELECT term FROM docs_vocab ORDER BY doc DESC, term LIMIT ?", (count,)
        )
        return [str(row[0]) for row in rows]


@contextmanager
def fts5_reference(db: Path) -> Iterator[Fts5Reference]:
    """An FTS5 index over the documents of the file `db` as it is now (the file is only read)."""
    memory = sqlite3.connect(":memory:")
    source = sqlite3.connect(db)
    try:
        source.backup(memory)
    finally:
        source.close()
    try:
        memory.execute(
            f"""CREATE VIRTUAL TABLE docs_fts USING fts5(
                terms, tags, content='docs', content_rowid='rowid', tokenize="{FTS_TOKENIZER}")"""
        )
        memory.execute("INSERT INTO docs_fts(docs_fts) VALUES ('rebuild')")
        memory.execute("CREATE VIRTUAL TABLE docs_vocab USING fts5vocab(docs_fts, 'row')")
        yield Fts5Reference(memory)
    finally:
        memory.close()
