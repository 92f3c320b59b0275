"""An in-process inverted index over the `docs` table, for BM25 keyword search.

The `docs` table's `terms` are the durable index; every process builds this one
from them (FTS5 was kept beside it until m011, unread). FTS5's `bm25()` scores
every row that contains any query term, one row at a time, and chat words are
common: at 100k documents a query touched tens of thousands of rows. Here the
postings of a term are two numpy arrays (document, term frequency), so scoring
is a handful of vector operations, and a filter is a boolean mask per document
and the list of the documents it passes: a search over a few of many documents
looks those up in each term's postings instead of masking them all
(`sqlite.postings`).

The scores are FTS5's (the tests hold them to an FTS5 index built over the same
rows): the same BM25 (`store.bm25`, as PostgreSQL ranks), over the same
statistics — every row of the table counts (any kind, active or not), a document's
length counts the tokens of its terms and filter tags, and only the terms score.

Other processes write to the same file, so before each query the cache
compares two cheap numbers with the database, inside one read snapshot: the
highest document rowid (new documents are read incrementally; rowids only
grow) and the last sequence number of `doc_changes`, a log that triggers fill
when a document is deleted or changes in a way the index sees (migration
m004). A changed document's old postings are marked dead and its current row
is read again. New documents go to a small tail (per-term Python lists) that
is merged into the arrays when it grows; dead postings are dropped then. When
the log has been pruned past the cache's position, the cache reloads.
"""

from __future__ import annotations

import itertools
import operator
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.store.base import SearchFilter
from memlane.store.bm25 import K1, B, idf, scored_words
from memlane.store.rare_terms import RareQuery, rare_bound
from memlane.store.sqlite.doc_filter import DocFilter, Docs, IntArray, Mask, filter_key
from memlane.store.sqlite.posting_merge import Postings, merged
from memlane.store.sqlite.postings import (
    DeadDocs,
    Part,
    Seen,
    Tail,
    held,
    passing_postings,
)

LOAD_CHUNK = 50_000  # documents read per query while loading
TAIL_MIN = 2_000  # documents the tail may hold before a merge (or n / 16 if larger)
RELOAD_CHANGES = 50_000  # more changed documents than this at once: reload instead

# the tags column's token count: `doc_tags` joins its tags with single spaces
_COLUMNS = """rowid, kind, scope, session_id, role, active, terms,
    length(tags) - length(replace(tags, ' ', '')) + (tags != '')"""
_DOC_ROWS = f"SELECT {_COLUMNS} FROM docs WHERE rowid > ? ORDER BY rowid LIMIT ?"

_NEWEST = (
    "SELECT coalesce((SELECT max(seq) FROM doc_changes), 0), "
    "coalesce((SELECT max(rowid) FROM docs), 0)"
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class KeywordHit:
    rowid: int
    score: float


class KeywordIndex:
    """BM25 over the `docs` table of one SQLite file; thread-safe; refreshed before each search."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._loaded = False
        self._hwm = 0  # highest docs rowid read
        self._seq = 0  # last doc_changes seq applied
        self._vocab: defaultdict[str, int] = defaultdict()
        self._vocab.default_factory = self._vocab.__len__  # a new term gets the next id
        self._docs = Docs()
        self._filter = DocFilter(self._docs)
        self._live = 0  # documents alive (FTS5's row count)
        self._total = 0.0  # tokens of the alive documents (FTS5's total size)
        self._dead = DeadDocs()
        # postings: term t's are _pdoc/_ptf[_off[t]:_off[t + 1]], documents ascending
        self._off = np.zeros(1, np.int64)
        self._pdoc = np.zeros(0, np.int32)
        self._ptf = np.zeros(0, np.int32)
        # new postings, per term, 4 bytes a posting (a list of Python ints took 40: a tail
        # of n / 16 documents was ~20 MB)
        self._tail: dict[int, Tail] = {}
        self._tail_docs = 0
        self._where = np.full(0, -1, np.int32)  # a rowid's latest document, -1: none
        self._seen = Seen()  # what searches found, until the next change

    @property
    def loaded(self) -> bool:
        """Whether a search read the documents yet (refreshing an unread index loads it all)."""
        return self._loaded

    # --- refresh ------------------------------------------------------------
    def refresh(self, conn: sqlite3.Connection) -> None:
        """Bring the cache up to date with the file, inside one read snapshot.

        A loaded cache first asks whether anything is new, in one statement: in a proxy
        the writer's thread catches the index up after each batch (`SQLiteSearch._catch_up`),
        so the searches on a request's path find nothing to read, and a snapshot of four
        statements cost more than the answer."""
        with self._lock:
            if self._loaded and self._current(conn):
                return
            self._seen.clear()  # the index may change: what searches found may not hold
            conn.execute("BEGIN")
            try:
                # two subqueries: SQLite reads one end of the key for a lone min() or max(),
                # but scans the whole log for both in one SELECT
                first, last = conn.execute(
                    "SELECT coalesce((SELECT min(seq) FROM doc_changes), 0), "
                    "coalesce((SELECT max(seq) FROM doc_changes), 0)"
                ).fetchone()
                changed: list[tuple[Any, ...]] = []
                if self._loaded and last > self._seq:
                    if self._seq < first - 1 or last - self._seq > RELOAD_CHANGES:
                        self._reset()  # the log was pruned past us, or too much changed
                    else:
                        changed = self._apply_changes(conn, last)
                if not self._loaded:
                    self._seq = int(last)
                self._read_new(conn, changed)
                self._loaded = True
            except BaseException:
                self._reset()  # half an update is worse than none: the next query reloads
                raise
            finally:
                conn.execute("COMMIT")

    def _current(self, conn: sqlite3.Connection) -> bool:
        """Whether no document was added and no change logged since the cache last read
        (rowids and the log's sequence only grow: a change logs a row, a new document takes
        a rowid above every one handed out)."""
        last, top = conn.execute(_NEWEST).fetchone()
        return bool(last == self._seq and top <= self._hwm)

    def _apply_changes(self, conn: sqlite3.Connection, last: int) -> list[tuple[Any, ...]]:
        """Kill the documents changed since; return their current rows, to index again."""
        changed = conn.execute(
            "SELECT DISTINCT doc_id FROM doc_changes WHERE seq > ? AND doc_id <= ?",
            (self._seq, self._hwm),
        ).fetchall()
        self._seq = int(last)
        if not changed:
            return []
        ids = np.fromiter((r[0] for r in changed), np.int64, len(changed))
        places = self._where[ids[ids < self._where.shape[0]]].astype(np.int64)
        places = places[places >= 0]
        self._kill(places[self._docs.alive[places]])
        rows: list[tuple[Any, ...]] = []
        wanted = sorted(int(i) for i in ids)
        for first in range(0, len(wanted), 500):  # SQLite bounds the parameters of a statement
            chunk = wanted[first : first + 500]
            rows += conn.execute(
                f"SELECT {_COLUMNS} FROM docs "
                f"WHERE rowid IN ({', '.join('?' for _ in chunk)}) ORDER BY rowid",
                chunk,
            ).fetchall()
        return rows

    def _kill(self, indexes: IntArray) -> None:
        """The documents at `indexes` (alive, distinct) died: a change or a deletion."""
        if not indexes.shape[0]:
            return
        docs = self._docs
        docs.alive[indexes] = False
        self._live -= indexes.shape[0]
        self._total -= float(docs.length[indexes].sum())  # whole numbers: exact in any order
        self._dead.add(indexes)
        self._filter.killed(indexes)

    def _read_new(self, conn: sqlite3.Connection, changed: list[tuple[Any, ...]]) -> None:
        """Index the `changed` rows again and the documents above the high-water mark, a
        chunk of rows at a time, and post them together (one merge, not one per chunk;
        after a write, one batch: each costs a few dozen vector operations however small)."""
        batches: list[Postings] = []
        count = 0
        rows = changed
        while True:
            new = conn.execute(_DOC_ROWS, (self._hwm, LOAD_CHUNK)).fetchall()
            if new:
                self._hwm = max(self._hwm, int(new[-1][0]))
            rows = rows + new if rows else new
            if rows:
                batches.append(self._register(rows))
                count += len(rows)
                rows = []
            if len(new) < LOAD_CHUNK:
                break
        self._post(batches, count)

    def _register(self, rows: Sequence[tuple[Any, ...]]) -> Postings:
        """Add rows of `_DOC_ROWS` as new documents; return their postings as (term,
        document, frequency), sorted by term then document."""
        docs = self._docs
        count, base = len(rows), docs.n
        docs.reserve(count)
        columns = list(zip(*rows, strict=True))
        split = [str(terms).split() for terms in columns[6]]
        lengths = np.fromiter(map(len, split), np.int64, count)
        term_ids = _term_ids(self._vocab, split, int(lengths.sum()))
        local = np.repeat(np.arange(count, dtype=np.int64), lengths)
        end = base + count
        docs.rowid[base:end] = columns[0]
        docs.length[base:end] = lengths + np.asarray(columns[7], np.int64)
        self._filter.register(base, columns[1:5])
        docs.active[base:end] = columns[5]
        docs.alive[base:end] = True
        docs.n = end
        self._place(docs.rowid[base:end], base)
        self._live += count
        self._total += float(docs.length[base:end].sum())

        keys, tfs = np.unique(term_ids * count + local, return_counts=True)
        return keys // count, keys % count + base, tfs

    def _place(self, rowids: IntArray, base: int) -> None:
        """Remember where each rowid's document now is (documents from `base`), so a change
        finds the documents it kills without a pass over every document. One int32 per
        rowid handed out: `docs` rowids are AUTOINCREMENT, dense."""
        top = int(rowids.max()) + 1
        if top > self._where.shape[0]:
            grown = np.full(max(top, 2 * self._where.shape[0], 1024), -1, np.int32)
            grown[: self._where.shape[0]] = self._where
            self._where = grown
        self._where[rowids] = np.arange(base, base + rowids.shape[0], dtype=np.int32)

    def _post(self, batches: list[Postings], count: int) -> None:
        """Put new postings in the tail, or merge them into the arrays when the tail is full."""
        if not batches:
            return
        if count + self._tail_docs <= max(TAIL_MIN, self._docs.n // 16):
            for terms, doc_index, tfs in batches:
                self._to_tail(terms, doc_index, tfs)
            self._tail_docs += count
            return
        self._merge(batches)

    def _to_tail(self, terms: IntArray, doc_index: IntArray, tfs: IntArray) -> None:
        tail = self._tail
        for term, doc, tf in zip(terms.tolist(), doc_index.tolist(), tfs.tolist(), strict=True):
            found = tail.get(term)
            if found is None:
                found = tail[term] = Tail()
            found.docs.append(doc)
            found.tfs.append(tf)

    def _merge(self, batches: list[Postings]) -> None:
        """Rebuild the arrays from themselves, the tail and `batches`, dropping dead
        documents (`posting_merge.merged`); the dead are forgotten then."""
        alive = self._docs.alive if self._dead.count else None
        fresh = self._fresh(batches, alive)
        if alive is not None:
            self._dead = DeadDocs()
        self._off, self._pdoc, self._ptf = merged(
            (self._off, self._pdoc, self._ptf), alive, fresh, len(self._vocab)
        )

    def _fresh(self, batches: list[Postings], alive: Mask | None) -> list[Postings]:
        """The tail's postings and `batches` (each grouped by term), the dead left out; the
        tail emptied."""
        fresh: list[Postings] = []
        if self._tail:
            terms = sorted(self._tail)
            parts = [self._tail[t].part for t in terms]
            fresh.append(
                (
                    np.repeat(terms, [d.shape[0] for d, _ in parts]),
                    np.concatenate([d for d, _ in parts]),
                    np.concatenate([f for _, f in parts]),
                )
            )
            self._tail, self._tail_docs = {}, 0
        fresh.extend(batches)
        if alive is None:
            return fresh
        return [(t[alive[d]], d[alive[d]], f[alive[d]]) for t, d, f in fresh]

    # --- search -------------------------------------------------------------
    def search(self, words: Sequence[str], flt: SearchFilter, k: int) -> list[KeywordHit]:
        """Up to `k` documents passing `flt`, best BM25 first (ties oldest first, as FTS5).

        Only the passing documents' postings are scored (`postings.passing_postings`);
        the statistics are the whole table's. A long query is scored by its rarest words
        (`bm25.scored_words`)."""
        with self._lock:
            if k <= 0 or self._live == 0:
                return []
            passing = self._filter.passing(flt)
            if passing is None:
                return []
            key = filter_key(flt)
            found: list[Part] = []
            weights: list[float] = []
            known = [word for word in dict.fromkeys(words) if word in self._vocab]
            for word in scored_words(known, lambda w: self._postings(self._vocab[w])):
                term = self._vocab[word]
                parts = self._parts(term)
                hits = sum(d.shape[0] for d, _ in parts)
                hits -= self._dead.holding(term, [d for d, _ in parts], self._docs.alive)
                if hits == 0:
                    continue
                chosen = passing_postings(parts, passing)
                self._seen.note(key, term, chosen[0])
                if chosen[0].shape[0] == 0:
                    continue
                found.append(chosen)
                weights.append(idf(self._live, hits))
            if not found:
                return []
            return self._best(*self._scores(found, weights), k)

    def _scores(self, found: list[Part], weights: list[float]) -> tuple[IntArray, FloatArray]:
        """Each found posting's BM25 score (a term's `weights`), all terms in one pass: the
        same operations on each posting as one term at a time, so the same bits."""
        counts = [d.shape[0] for d, _ in found]
        doc_index = np.concatenate([d for d, _ in found]).astype(np.int64)
        tf = np.concatenate([t for _, t in found]).astype(np.float64)
        weight = np.repeat(np.asarray(weights, np.float64), counts)
        avgdl = self._total / self._live
        norm = K1 * (1.0 - B + B * self._docs.length[doc_index] / avgdl)
        return doc_index, weight * tf * (K1 + 1.0) / (tf + norm)

    def holders(self, query: RareQuery) -> dict[str, list[int]]:
        """For each of the query's words that at most `max_df` documents passing its filter
        hold (and at most `max_share` of those documents), their rowids, oldest first; a
        word more common than that is left out."""
        with self._lock:
            if query.max_df <= 0 or self._live == 0:
                return {}
            passing = self._filter.passing(query.flt)
            if passing is None:
                return {}
            max_df = rare_bound(query.max_df, query.max_share, passing.count)
            if max_df < 2:
                return {}  # a word only its seed holds links nothing
            out: dict[str, list[int]] = {}
            vocab, rowid, key = self._vocab, self._docs.rowid, filter_key(query.flt)
            for word in query.words:
                term = vocab.get(word)
                if term is None:
                    continue
                chosen = self._seen.held(key, term, max_df)
                if chosen is False:
                    chosen = held([d for d, _ in self._parts(term)], passing, max_df)
                if chosen is not None and chosen.shape[0]:
                    out[word] = np.sort(rowid[chosen]).tolist()
            return out

    def _postings(self, term: int) -> int:
        """How many postings a term has, dead ones not yet merged out included: what
        choosing a long query's rarest words reads (`bm25.scored_words`), at no cost."""
        merged = int(self._off[term + 1] - self._off[term]) if term + 1 < self._off.shape[0] else 0
        tail = self._tail.get(term)
        return merged + (0 if tail is None else len(tail.docs))

    def _parts(self, term: int) -> list[Part]:
        """A term's postings as the arrays and the tail hold them (no copy into one),
        documents ascending in each and the tail's after the arrays'."""
        parts: list[Part] = []
        if term + 1 < self._off.shape[0]:
            start, end = int(self._off[term]), int(self._off[term + 1])
            if end > start:
                parts.append((self._pdoc[start:end], self._ptf[start:end]))
        tail = self._tail.get(term)
        if tail is not None:
            parts.append(tail.part)
        return parts

    def _best(self, doc_index: IntArray, scores: FloatArray, k: int) -> list[KeywordHit]:
        """Sum each document's scores over the terms; the top k, ties oldest first."""
        docs = self._docs
        if doc_index.shape[0] * 16 < docs.n:
            unique, inverse = np.unique(doc_index, return_inverse=True)
            totals = np.bincount(inverse, weights=scores)
        else:
            dense = np.bincount(doc_index, weights=scores, minlength=docs.n)
            unique = np.flatnonzero(dense)
            totals = dense[unique]
        if unique.shape[0] > k:
            threshold = np.partition(totals, unique.shape[0] - k)[unique.shape[0] - k]
            top = totals >= threshold
            unique, totals = unique[top], totals[top]
        rowids = docs.rowid[unique]
        order = np.lexsort((rowids, -totals))[:k]
        return [KeywordHit(int(rowids[i]), float(totals[i])) for i in order]


def _term_ids(vocab: defaultdict[str, int], split: list[list[str]], total: int) -> IntArray:
    """The ids of the documents' terms, in order; a term not seen yet gets the next id.

    One `itemgetter` call looks every term up in C (a missing one goes through the
    vocabulary's `__missing__`, as a subscript does): half what a `map` of
    `vocab.__getitem__` cost, which paid a Python-level call per term."""
    if total == 0:
        return np.zeros(0, np.int64)
    terms = list(itertools.chain.from_iterable(split))
    if total == 1:
        return np.array([vocab[terms[0]]], np.int64)
    return np.fromiter(operator.itemgetter(*terms)(vocab), np.int64, total)
