"""Merging new postings into the keyword index's arrays, dropping the dead, in bounded memory.

The arrays hold every term's postings, grouped by term (`keyword_index`): term t's are
`doc[off[t]:off[t + 1]]` and `tf[...]`, documents ascending. New postings wait in a tail
until it fills; then one merge rebuilds the arrays from themselves and the new ones.
Each source is grouped by term, so a posting's place is its term's offset plus what
earlier sources hold of that term plus its rank in its own run: a few vector operations
per source, no sort of the whole index. The old arrays (most postings) are placed
`MERGE_CHUNK` postings at a time, so what a merge allocates beside the old and the new
arrays stays the same however large the index grows: placing them all at once took five
times the arrays' own size.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.store.sqlite.doc_filter import IntArray, Mask
from memlane.store.sqlite.postings import Int32Array

MERGE_CHUNK = 1 << 16
"""Postings of the arrays a merge places at a time: what it allocates beside the arrays
(about 40 bytes a posting placed) stays near 10 MB however large the index grows."""

Postings = tuple[IntArray, IntArray, IntArray]
"""(term, document, frequency) of new postings, grouped by term, documents ascending."""
Arrays = tuple[IntArray, Int32Array, Int32Array]
"""The index's postings: each term's offset (one more than the terms), document, frequency."""


def merged(arrays: Arrays, alive: Mask | None, fresh: list[Postings], terms: int) -> Arrays:
    """`arrays` with the `fresh` postings (each grouped by term, later sources after
    earlier ones within a term) put in, for a vocabulary of `terms` terms; the postings
    of documents `alive` does not mark dropped from the arrays (the fresh ones are
    expected alive)."""
    old_off, pdoc, ptf = arrays
    keep = alive[pdoc] if alive is not None else None  # one byte a posting
    counts = np.zeros(terms, np.int64)
    counts[: old_off.shape[0] - 1] = _run_lengths(old_off, keep)
    runs = [np.bincount(t, minlength=terms) for t, _, _ in fresh]
    off = np.zeros(terms + 1, np.int64)
    np.cumsum(counts + sum(runs), out=off[1:])
    new_doc = np.empty(int(off[-1]), np.int32)
    new_tf = np.empty(int(off[-1]), np.int32)
    before = off[:-1].copy()  # where each term's next postings go
    for first, last in _chunks(old_off, MERGE_CHUNK):
        lo, hi = int(old_off[first]), int(old_off[last])
        docs, tfs = pdoc[lo:hi], ptf[lo:hi]
        if keep is not None:
            docs, tfs = docs[keep[lo:hi]], tfs[keep[lo:hi]]
        _place(new_doc, new_tf, before[first:last], counts[first:last], docs, tfs)
    for (_, doc_index, frequencies), run in zip(fresh, runs, strict=True):
        _place(new_doc, new_tf, before, run, doc_index, frequencies)
    return off, new_doc, new_tf


def _run_lengths(off: IntArray, keep: Mask | None) -> IntArray:
    """Each term's postings in arrays laid out by `off`, only those `keep` marks when given."""
    lengths = np.diff(off)
    if keep is None:
        return lengths
    held = lengths > 0
    kept = np.zeros(lengths.shape[0], np.int64)
    if keep.shape[0]:  # a segment's start where it is not empty: each ends at the next one's
        kept[held] = np.add.reduceat(keep, off[:-1][held], dtype=np.int64)
    return kept


def _chunks(off: IntArray, size: int) -> list[tuple[int, int]]:
    """Runs of whole terms [first, last) of arrays laid out by `off`, about `size` postings
    each (a term with more is a run of its own)."""
    terms = off.shape[0] - 1
    if terms <= 0:
        return []
    marks = np.searchsorted(off, np.arange(size, int(off[-1]), size), side="right") - 1
    bounds = sorted({0, terms, *(int(m) for m in marks if 0 < m < terms)})
    return list(itertools.pairwise(bounds))


def _place(
    doc_out: Int32Array,
    tf_out: Int32Array,
    before: IntArray,
    run: IntArray,
    docs: npt.NDArray[Any],
    tfs: npt.NDArray[Any],
) -> None:
    """Put postings grouped by term (`run` of each term, in order) where `before` says
    each term's next ones go, and move `before` past them."""
    first = np.cumsum(run) - run  # where each term's run starts among these postings
    place = np.repeat(before - first, run)
    place += np.arange(docs.shape[0])
    doc_out[place], tf_out[place] = docs, tfs
    before += run
