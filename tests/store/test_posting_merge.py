"""A keyword-index merge rebuilds the postings with little beside the arrays it makes: the
old arrays are placed a chunk at a time (`MERGE_CHUNK`), dead documents dropped, and the
result is what placing them all at once gave."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from memlane.store.sqlite import posting_merge
from memlane.store.sqlite.keyword_index import KeywordIndex
from memlane.store.sqlite.posting_merge import Postings

TERMS = 4_000
DOCS = 20_000
POSTINGS = 400_000


def built(dead: int) -> tuple[KeywordIndex, list[Postings], dict[int, list[tuple[int, int]]]]:
    """An index whose arrays hold `POSTINGS` postings, `dead` of its documents killed, a
    tail and a batch of new documents; and every live posting, per term, oldest first."""
    rng = np.random.default_rng(7)
    index = KeywordIndex()
    for term in range(TERMS):
        index._vocab[f"t{term}"]
    terms = rng.integers(0, TERMS, POSTINGS)
    docs = rng.integers(0, DOCS, POSTINGS)
    keys = np.unique(terms * DOCS + docs)  # one posting per (term, document), sorted
    terms, docs = keys // DOCS, keys % DOCS
    tfs = rng.integers(1, 5, keys.shape[0])
    index._off = np.zeros(TERMS + 1, np.int64)
    np.cumsum(np.bincount(terms, minlength=TERMS), out=index._off[1:])
    index._pdoc, index._ptf = docs.astype(np.int32), tfs.astype(np.int32)
    total = DOCS + 200
    index._docs.reserve(total)
    index._docs.n = total
    index._docs.alive[:total] = True
    killed = rng.choice(DOCS, dead, replace=False) if dead else np.zeros(0, np.int64)
    index._docs.alive[killed] = False
    index._dead.add(killed.astype(np.int64))
    expected: dict[int, list[tuple[int, int]]] = {}
    for term, doc, tf in zip(terms.tolist(), docs.tolist(), tfs.tolist(), strict=True):
        if index._docs.alive[doc]:
            expected.setdefault(term, []).append((doc, tf))
    for doc in range(DOCS, DOCS + 100):  # the tail
        tail_terms = np.asarray(sorted({int(t) for t in rng.integers(0, TERMS, 10)}), np.int64)
        index._to_tail(
            tail_terms, np.full(tail_terms.shape[0], doc), np.full(tail_terms.shape[0], 2)
        )
        for term in tail_terms.tolist():
            expected.setdefault(term, []).append((doc, 2))
    batch_terms, batch_docs = [], []
    for doc in range(DOCS + 100, DOCS + 200):  # a batch, grouped by term as `_register` gives
        for term in sorted({int(t) for t in rng.integers(0, TERMS, 10)}):
            batch_terms.append(term)
            batch_docs.append(doc)
    order = np.lexsort((batch_docs, batch_terms))
    batch = (
        np.asarray(batch_terms, np.int64)[order],
        np.asarray(batch_docs, np.int64)[order],
        np.full(len(batch_terms), 3, np.int64),
    )
    for term, doc in zip(batch[0].tolist(), batch[1].tolist(), strict=True):
        expected.setdefault(term, []).append((doc, 3))
    return index, [batch], expected


def postings(index: KeywordIndex) -> dict[int, list[tuple[int, int]]]:
    found: dict[int, list[tuple[int, int]]] = {}
    for term in range(index._off.shape[0] - 1):
        start, end = int(index._off[term]), int(index._off[term + 1])
        if end > start:
            docs, tfs = index._pdoc[start:end].tolist(), index._ptf[start:end].tolist()
            found[term] = list(zip(docs, tfs, strict=True))
    return found


@pytest.mark.parametrize("dead", [0, 2_000])
def test_a_merge_keeps_every_live_posting_in_order(dead: int) -> None:
    index, batches, expected = built(dead)
    index._merge(batches)
    assert postings(index) == expected
    assert index._dead.count == 0
    assert not index._tail


@pytest.mark.parametrize("dead", [0, 2_000])
def test_a_merge_allocates_little_beside_the_arrays_it_makes(
    dead: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Placing every posting at once took about five times the arrays' size beside them
    (term, rank and place vectors of 8 bytes a posting, and copies without the dead);
    a chunk at a time, the arrays made and a chunk's worth."""
    monkeypatch.setattr(posting_merge, "MERGE_CHUNK", 8_192)
    index, batches, _ = built(dead)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        index._merge(batches)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    made = index._pdoc.nbytes + index._ptf.nbytes
    assert peak < 1.5 * made


def test_the_tail_keeps_four_bytes_a_posting() -> None:
    """New documents wait in the tail until a merge, up to a sixteenth of the index: as
    lists of Python ints they took about 40 bytes a posting (20 MB at 200k documents)."""
    index = KeywordIndex()
    count = 200_000
    terms = np.repeat(np.arange(100, dtype=np.int64), count // 100)
    docs = np.tile(np.arange(10_000, 10_000 + count // 100, dtype=np.int64), 100)
    tfs = np.ones(count, np.int64)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        index._to_tail(terms, docs, tfs)
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert held < 2 * 4 * count * 1.5  # two arrays of C ints, with their growth slack
    assert index._tail[0].part[0].tolist() == list(range(10_000, 12_000))
