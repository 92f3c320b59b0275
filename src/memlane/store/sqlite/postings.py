"""A term's postings narrowed to the documents a filter passes, by whichever way is cheaper.

A request's recall asks for its conversation, its namespace and the global scope:
a few hundred documents of a memory that may hold hundreds of conversations. A
chat word is in most of those documents, so looking each of its postings up in
the filter's mask costs the whole memory. When the filter passes few documents
compared with a term's postings, each passing document is looked up in the
postings instead (both are sorted by document): a binary search per passing
document. Both ways return the same postings in the same (document) order, so
the scores and their sums are the same to the last bit.

BM25's document frequency stays global: it counts every live document holding
the term. Documents killed since the last merge still sit in the postings;
`DeadDocs` counts, per term, how many of them hold it, checking only the kills
since that term was last asked about.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from memlane.store.sqlite.doc_filter import Mask, Passing

Int32Array = npt.NDArray[np.int32]
Part = tuple[Int32Array, Int32Array]
"""Some of a term's postings, documents ascending: (document, term frequency)."""

FEW = 16
"""A binary search costs about as much as this many mask lookups (measured: 12k postings
against 1,250 passing documents cost the same both ways; against 60, a third)."""

HELD_CHUNK = 4_096
"""Postings of a word `held` masks at a time."""
LOOKUP_CHUNK = 256
"""Passing documents `held` looks up in a word's postings at a time (about as costly)."""

SEEN_FILTERS = 16
"""Filters whose searches' findings `Seen` keeps (the proxy's requests interleave)."""
SEEN_DOCS = 64
"""Passing documents `Seen` keeps of a word, at most (a rare word has at most 20 of them)."""

_EMPTY = np.zeros(0, np.int32)


def _found(docs: Int32Array, wanted: Int32Array) -> tuple[Int32Array, npt.NDArray[np.intp]]:
    """Which of `wanted` (ascending) `docs` holds, and where: one binary search each, and
    a clipped look at where each would be (a wanted document past the last is not there;
    narrowing `wanted` to `docs`' range first cost more numpy calls than it saved)."""
    if not docs.shape[0]:
        return _EMPTY, np.zeros(0, np.intp)
    places = docs.searchsorted(wanted)
    hit = docs.take(places, mode="clip") == wanted
    return wanted[hit], places[hit]


def passing_postings(parts: Sequence[Part], passing: Passing) -> Part:
    """The postings in `parts` of the documents `passing` lets through, documents ascending
    within each part, parts in order: exactly what masking every posting gives."""
    found: list[Part] = []
    for docs, tfs in parts:
        if passing.count * FEW < docs.shape[0]:
            chosen, places = _found(docs, passing.docs)
            found.append((chosen, tfs[places]))
        else:
            keep = passing.mask[docs]
            found.append((docs[keep], tfs[keep]))
    if len(found) == 1:
        return found[0]
    if not found:
        return _EMPTY, _EMPTY
    return np.concatenate([d for d, _ in found]), np.concatenate([t for _, t in found])


def held(parts: Sequence[Int32Array], passing: Passing, most: int) -> Int32Array | None:
    """The documents (a word's postings, in parts: the arrays' and the tail's) that pass,
    or None when more than `most` do."""
    found: list[Int32Array] = []
    count = 0
    for docs in parts:
        for passed in _passing_chunks(docs, passing):
            count += passed.shape[0]
            if count > most:
                return None
            found.append(passed)
    if len(found) == 1:
        return found[0]
    return np.concatenate(found) if found else _EMPTY


def _passing_chunks(docs: Int32Array, passing: Passing) -> Iterator[Int32Array]:
    """The documents of `docs` that pass, a chunk at a time, each way: a word common
    among the passing documents is known to be common after a chunk or two."""
    if passing.count * FEW < docs.shape[0]:
        wanted = passing.docs
        for start in range(0, wanted.shape[0], LOOKUP_CHUNK):
            yield _found(docs, wanted[start : start + LOOKUP_CHUNK])[0]
    else:
        for start in range(0, docs.shape[0], HELD_CHUNK):
            chunk = docs[start : start + HELD_CHUNK]
            yield chunk[passing.mask[chunk]]


class Tail:
    """A term's postings added since the last merge, documents ascending.

    A write appends to C int arrays (4 bytes a posting, a few dozen nanoseconds each:
    a catch-up adds a few hundred); a search reads numpy arrays that only take in what
    was added since the last read, and hands out views of them, no copy: a common word
    gains postings after every write, and converting its whole tail again on each
    search (copies of up to `TAIL_MIN` postings) cost more than scoring it. Only the
    room past the postings read is ever written, so a view handed out keeps its values.
    """

    __slots__ = ("_docs", "_read", "_tfs", "docs", "tfs")

    def __init__(self) -> None:
        self.docs: array[int] = array("i")  # what writes append to
        self.tfs: array[int] = array("i")
        self._docs = _EMPTY  # what searches read: the first `_read` postings
        self._tfs = _EMPTY
        self._read = 0

    @property
    def part(self) -> Part:
        count = len(self.docs)
        if count > self._read:
            if count > self._docs.shape[0]:
                size = max(count, self._docs.shape[0] * 3 // 2, 4)
                grown_docs, grown_tfs = np.empty(size, np.int32), np.empty(size, np.int32)
                grown_docs[: self._read] = self._docs[: self._read]
                grown_tfs[: self._read] = self._tfs[: self._read]
                self._docs, self._tfs = grown_docs, grown_tfs
            # views of the C arrays only for the copy: a write may resize them after
            self._docs[self._read : count] = np.frombuffer(self.docs, np.int32)[self._read :]
            self._tfs[self._read : count] = np.frombuffer(self.tfs, np.int32)[self._read :]
            self._read = count
        return self._docs[:count], self._tfs[:count]


class Seen:
    """How many documents passing a filter hold each word a search asked about (and which,
    when few), until the index changes.

    A request's rare-word expansion asks which passing documents hold each word of its
    best hits, and those hits say the question's words: the longest postings of the
    question, just looked up by its keyword search with the same filter. What the
    search found answers again, for the last `SEEN_FILTERS` filters searched; the index
    forgets it all whenever a refresh reads a change, so an answer never outlives a
    write, a deletion or a forget.
    """

    def __init__(self) -> None:
        self._found: OrderedDict[Hashable, dict[int, tuple[int, Int32Array | None]]]
        self._found = OrderedDict()

    def clear(self) -> None:
        self._found.clear()

    def note(self, key: Hashable, term: int, docs: Int32Array) -> None:
        """The passing documents (of the filter `key`) that hold `term`, all of them."""
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = {}
            while len(self._found) > SEEN_FILTERS:
                self._found.popitem(last=False)
        else:
            self._found.move_to_end(key)
        found[term] = (docs.shape[0], docs if docs.shape[0] <= SEEN_DOCS else None)

    def held(self, key: Hashable, term: int, most: int) -> Int32Array | Literal[False] | None:
        """`held`'s answer for `term` when a search found it: None for more than `most`
        documents, else those documents; False when not known."""
        found = self._found.get(key)
        known = None if found is None else found.get(term)
        if known is None:
            return False
        count, docs = known
        if count > most:
            return None
        return False if docs is None else docs


class DeadDocs:
    """The documents killed since the last merge (their postings are still in the arrays
    and the tail), and for each term asked about, how many of them hold it.

    A killed document is never alive again (a changed row comes back as a new document),
    and it was in its terms' postings before it was killed; so a term's count only grows
    by the kills since it was last asked about, and only those are looked up.
    """

    def __init__(self) -> None:
        self._docs = np.zeros(0, np.int32)
        self.count = 0
        self._seen: dict[int, tuple[int, int]] = {}  # term: (kills checked, holders among them)

    def add(self, indexes: npt.NDArray[np.int64]) -> None:
        """Documents (alive until now, distinct) died."""
        end = self.count + indexes.shape[0]
        if end > self._docs.shape[0]:
            grown = np.zeros(max(end, 2 * self._docs.shape[0], 256), np.int32)
            grown[: self.count] = self._docs[: self.count]
            self._docs = grown
        self._docs[self.count : end] = indexes
        self.count = end

    def holding(self, term: int, parts: Sequence[Int32Array], alive: Mask) -> int:
        """How many dead documents hold `term`, whose postings are `parts`."""
        if not self.count:
            return 0
        checked, holders = self._seen.get(term, (0, 0))
        if checked == self.count:
            return holders
        new = self._docs[checked : self.count]
        total = sum(docs.shape[0] for docs in parts)
        if new.shape[0] * FEW < total:
            new = np.sort(new)
            for docs in parts:
                if docs.shape[0]:
                    holders += _found(docs, new)[0].shape[0]
        else:  # count them all again: the postings not alive
            holders = total - sum(int(np.count_nonzero(alive[docs])) for docs in parts)
        self._seen[term] = (self.count, holders)
        return holders
