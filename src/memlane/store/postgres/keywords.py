"""Keyword search for the PostgreSQL backend: BM25 over a GIN-indexed `tsvector`.

The `tsvector` of a document holds exactly the shared analyser's terms
(`store.analysis.terms`) with their positions, so the term frequency is there
and identifiers match as they do in SQLite. PostgreSQL ranks with `ts_rank`,
which knows nothing of how rare a term is; BM25 needs the collection's
statistics: the number of documents, their average length and each query
term's document frequency.

The document frequency uses FTS5's idf, as the SQLite backend does, so both
rank alike. Counting those on every query costs a scan per common term, so while the
index is small they are counted exactly, and once it is large they are kept
for `STATS_TTL` seconds per process. A new document is found at once either
way; only its weight in the ranking may lag by that long.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from memlane.store.bm25 import idf, scored_words

Conn = psycopg.Connection[dict[str, Any]]

EXACT_BELOW = 1_000
"""Below this many indexed documents every statistic is counted exactly, on every query;
from it on they are kept for `STATS_TTL`. Counting them scans every document that holds
a common word, on every search: at 5,000, a home's first thousands of documents (its
first weeks) paid that on every request, and `load.py --clients 200` on PostgreSQL, whose
home is in that range, served 86-93 req/s against 145-149 with them kept from 1,000.
Below 1,000 a count is cheap, and a small memory's ranking moves most with each entry."""
STATS_TTL = 60.0
DF_CACHE_SIZE = 50_000
# From this many documents on, words found in most of them are left out of the match.
PRUNE_FROM = 1_000
# A document keeps at most this many positions (PostgreSQL's limits on a tsvector).
MAX_POSITION = 16_383
MAX_POSITIONS_PER_TERM = 256


def tsvector_literal(words: Sequence[str]) -> str:
    """A tsvector whose lexemes are exactly `words` (no stemming), with their positions."""
    positions: dict[str, list[int]] = {}
    for index, word in enumerate(words[:MAX_POSITION], start=1):
        positions.setdefault(word, []).append(index)
    return " ".join(
        f"{_quote(word)}:{','.join(map(str, spots[:MAX_POSITIONS_PER_TERM]))}"
        for word, spots in positions.items()
    )


def tsquery_literal(words: Sequence[str]) -> str:
    """A tsquery matching a document that has any of `words`, exactly."""
    return " | ".join(_quote(word) for word in words)


def _quote(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class QueryWeights:
    words: list[str]
    idf: list[float]
    avgdl: float
    match: list[str]
    """The words worth ranking by: those in half the documents or more weigh ~nothing
    yet cost the most to score, so they are left out (and may leave none)."""


def query_weights(words: Sequence[str], n: float, avgdl: float, df: dict[str, int]) -> QueryWeights:
    """BM25 weights from the collection's statistics, with FTS5's idf (the SQLite backend's):
    a word in half the documents or more weighs ~0. A long query keeps its rarest words
    (`bm25.scored_words`), as in SQLite.

    The count and the frequencies are two reads: another replica may add documents in
    between (or the count may come from the cache), so a frequency above the count is
    clamped to it, never a negative logarithm.
    """
    df = {w: min(max(df.get(w, 0), 0), int(n)) for w in words}
    words = scored_words(words, df.__getitem__)
    weights = [idf(n, df[w]) for w in words]
    informative = [w for w in words if df[w] * 2 <= n] if n >= PRUNE_FROM else list(words)
    return QueryWeights(list(words), weights, avgdl, informative)


class CollectionStats:
    """Document count, average length and document frequencies, exact or briefly cached."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: tuple[float, float, float] | None = None  # n, avgdl, taken at
        self._df: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def weigh(self, conn: Conn, words: Sequence[str]) -> QueryWeights:
        """BM25 weights of the query's words against the current collection: from the
        kept statistics, the words not kept counted; or, when the totals are not kept
        (a small memory's, or past `STATS_TTL`), the totals and every word counted
        together, in one statement."""
        totals = self._kept_totals()
        if totals is None:
            n, avgdl, df = self._count_with_totals(conn, words)
        else:
            n, avgdl = totals
            df = self._kept_frequencies(words)
            missing = [w for w in words if w not in df]
            if missing:
                df.update(self._count(conn, missing))
        return query_weights(words, n, avgdl, df)

    def _kept_totals(self) -> tuple[float, float] | None:
        with self._lock:
            kept = self._totals
        if kept is None or kept[0] < EXACT_BELOW or time.monotonic() - kept[2] >= STATS_TTL:
            return None
        return kept[0], kept[1]

    def _kept_frequencies(self, words: Sequence[str]) -> dict[str, int]:
        now = time.monotonic()
        found: dict[str, int] = {}
        with self._lock:
            for word in words:
                hit = self._df.get(word)
                if hit is not None and now - hit[1] < STATS_TTL:
                    found[word] = hit[0]
        return found

    def _count(self, conn: Conn, words: Sequence[str]) -> dict[str, int]:
        """The words' document frequencies, counted and kept."""
        rows = conn.execute(FREQUENCIES_SQL, _words(words)).fetchall()
        return self._keep({r["word"]: int(r["df"]) for r in rows})

    def _count_with_totals(
        self, conn: Conn, words: Sequence[str]
    ) -> tuple[float, float, dict[str, int]]:
        """The collection's document count and average length, and the words' document
        frequencies, counted together and kept."""
        rows = conn.execute(COUNT_SQL, _words(words)).fetchall()
        n, avgdl = float(rows[0]["n"]), max(float(rows[0]["avgdl"]), 1.0)
        with self._lock:
            self._totals = (n, avgdl, time.monotonic())
        return (
            n,
            avgdl,
            self._keep({r["word"]: int(r["df"]) for r in rows if r["word"] is not None}),
        )

    def _keep(self, counted: dict[str, int]) -> dict[str, int]:
        now = time.monotonic()
        with self._lock:
            for word, df in counted.items():
                self._df[word] = (df, now)
                self._df.move_to_end(word)
            while len(self._df) > DF_CACHE_SIZE:
                self._df.popitem(last=False)
        return counted


def _words(words: Sequence[str]) -> dict[str, list[str]]:
    return {"words": list(words), "queries": [tsquery_literal([w]) for w in words]}


FREQUENCIES_SQL = """
    SELECT t.word, (SELECT count(*) FROM docs WHERE terms @@ t.query) AS df
    FROM unnest(%(words)s::text[], %(queries)s::tsquery[]) AS t(word, query)"""
"""How many documents hold each word."""

COUNT_SQL = f"""
    SELECT c.n, c.avgdl, f.word, f.df
    FROM (
        SELECT count(*)::float8 AS n, coalesce(avg(length), 1)::float8 AS avgdl FROM docs
    ) c
    LEFT JOIN LATERAL ({FREQUENCIES_SQL}
    ) f ON true"""
"""The collection's document count and average length, on every row, with how many
documents hold each word (one row of totals alone when no word is asked): one round trip
in front of a search where there were two, on every search of a memory under
`EXACT_BELOW` documents."""


_SCORED = """
    q AS MATERIALIZED (
        SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS q(term, idf)
    ),
    scored AS (
        -- Score narrow rows (no text), keep the best; only the winners are read whole.
        SELECT d.seq, (
            SELECT sum(q.idf * u.tf * (%(k1)s + 1)
                       / (u.tf + %(k1)s * (1 - %(b)s + %(b)s * d.length / %(avgdl)s)))
            FROM (
                -- only this document's query lexemes: mark them, keep the marked
                SELECT lexeme, cardinality(positions)::float8 AS tf
                FROM unnest(ts_filter(setweight(d.terms, 'A', %(terms)s::text[]), '{{a}}'))
            ) u
            JOIN q ON q.term = u.lexeme
        ) AS score
        FROM docs d
        WHERE d.active AND d.terms @@ %(any)s::tsquery AND {where}
        ORDER BY score DESC, d.seq
        LIMIT %(limit)s
    )"""

_COLUMNS = "d.seq, d.kind, d.ref, d.scope, d.session_id, d.role, d.text, d.created_at"

SEARCH_SQL = (
    "WITH"
    + _SCORED
    + f"""
    SELECT {_COLUMNS}, s.score
    FROM scored s JOIN docs d ON d.seq = s.seq
    ORDER BY s.score DESC, s.seq
"""
)
"""The `limit` best documents by BM25 over the informative words (`QueryWeights.match`)."""

SEARCH_AND_FILL_SQL = (
    "WITH"
    + _SCORED
    + f""",
    counted AS (SELECT count(*)::int AS n FROM scored),
    filled AS (
        -- Places the informative words left empty go to the newest documents that have
        -- any query word (those words weigh ~0, so scoring them all would change nothing).
        -- Not read at all when the scored ones fill the limit.
        SELECT d.seq FROM docs d
        WHERE (SELECT n FROM counted) < %(limit)s
          AND d.active AND d.terms @@ %(every)s::tsquery AND {{where}}
          AND d.seq NOT IN (SELECT seq FROM scored)
        ORDER BY d.seq DESC
        LIMIT %(limit)s - (SELECT n FROM counted)
    ),
    picked AS (
        SELECT seq, score, 0 AS part FROM scored
        UNION ALL
        SELECT seq, 0.0::float8, 1 FROM filled
    )
    SELECT {_COLUMNS}, p.score
    FROM picked p JOIN docs d ON d.seq = p.seq
    ORDER BY p.part, p.score DESC, CASE WHEN p.part = 0 THEN p.seq ELSE -p.seq END
"""
)
"""`SEARCH_SQL`, then the places it leaves empty filled with the newest documents that
have any of the query's words, best first then newest first, in one statement: each
statement is a round trip in front of the request, and a question's common words left
places empty in three searches in four of `load.py`'s."""

FILL_SQL = f"""
    -- No informative word: the newest documents that have any of the query's words.
    WITH picked AS (
        SELECT d.seq FROM docs d
        WHERE d.active AND d.terms @@ %(every)s::tsquery AND {{where}}
        ORDER BY d.seq DESC
        LIMIT %(limit)s
    )
    SELECT {_COLUMNS}, 0.0::float8 AS score
    FROM picked p JOIN docs d ON d.seq = p.seq
    ORDER BY d.seq DESC
"""

RARE_SQL = """
    -- For each word, its holders passing the filter, at most %(cap)s of them: a word
    -- with more is common, and its scan stops there.
    SELECT t.word, h.seq, h.kind, h.ref, h.scope, h.session_id, h.role, h.text, h.created_at
    FROM unnest(%(words)s::text[], %(queries)s::tsquery[]) AS t(word, query)
    CROSS JOIN LATERAL (
        SELECT d.seq, d.kind, d.ref, d.scope, d.session_id, d.role, d.text, d.created_at
        FROM docs d
        WHERE d.active AND d.terms @@ t.query AND {where}
        LIMIT %(cap)s
    ) h
"""

VISIBLE_SQL = """
    SELECT count(*) AS n FROM (
        SELECT 1 FROM docs d WHERE d.active AND {where} LIMIT %(enough)s
    ) v
"""
