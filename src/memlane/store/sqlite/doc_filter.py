"""The keyword index's documents: their columns, and which of them pass a search filter.

A document is a position in `Docs` (growable numpy columns); the strings a filter
compares (kinds, scopes, sessions, roles) are small integer codes (`Codes`).
`DocFilter` answers a `SearchFilter` as a boolean mask over the documents and
the list of those that pass, cached per filter, extended over documents added
since and cleared in place where a document dies; a filter by scope looks at
its scopes' own documents, not at every document's scope.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.store.base import SearchFilter
from memlane.store.documents import TURN_ROLES

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
Mask = npt.NDArray[np.bool_]
MASKS_KEPT = 16  # filters whose masks are cached (a proxy asks with the same few again and again)


class Docs:
    """Per-document columns, growable; a document's index is its position here."""

    def __init__(self) -> None:
        self.n = 0
        self.rowid = np.zeros(0, np.int64)
        self.length = np.zeros(0, np.float64)
        self.scope = np.zeros(0, np.int32)
        self.session = np.zeros(0, np.int32)
        self.kind = np.zeros(0, np.int32)
        self.role = np.zeros(0, np.int32)
        self.active = np.zeros(0, np.bool_)
        self.alive = np.zeros(0, np.bool_)

    def reserve(self, count: int) -> None:
        capacity = self.rowid.shape[0]
        if self.n + count <= capacity:
            return
        size = max(self.n + count, 2 * capacity, 1024)
        for name in ("rowid", "length", "scope", "session", "kind", "role", "active", "alive"):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)


class Codes:
    """Small integer codes for the strings a filter compares (scopes, sessions, kinds, roles)."""

    def __init__(self) -> None:
        self.codes: dict[str | None, int] = {}

    def encode(self, values: Sequence[str | None]) -> list[int]:
        return list(map(_encoder(self.codes, values), values))

    def known(self, values: Sequence[str | None]) -> list[int]:
        return [self.codes[v] for v in values if v in self.codes]


def _encoder(codes: dict[Any, int], values: Sequence[Any]) -> Callable[[Any], int]:
    """Give each value not yet in `codes` the next code; return the lookup (C speed in `map`)."""
    for value in set(values).difference(codes):
        codes[value] = len(codes)
    return codes.__getitem__


class Passing:
    """A filter's cached answer: a mask over the documents, the passing documents (ascending
    positions: a search over few of many documents looks them up in the postings), and
    how many pass. A filter over every scope keeps no list until one is asked for: a
    search over most documents never needs it."""

    __slots__ = ("_docs", "count", "mask")

    def __init__(self, mask: Mask, docs: Int32Array | None) -> None:
        self.mask = mask
        self._docs = docs
        self.count = int(np.count_nonzero(mask) if docs is None else docs.shape[0])

    @property
    def docs(self) -> Int32Array:
        if self._docs is None:
            self._docs = np.flatnonzero(self.mask).astype(np.int32)
        return self._docs

    def extend(self, fresh: Mask, docs: Int32Array | None) -> None:
        """The answer over documents added since: their mask, and those that pass."""
        if docs is None:
            docs = (np.flatnonzero(fresh) + self.mask.shape[0]).astype(np.int32)
        self.mask = np.concatenate([self.mask, fresh])
        if self._docs is not None:
            self._docs = np.concatenate([self._docs, docs])
        self.count += int(docs.shape[0])

    def kill(self, indexes: IntArray) -> None:
        """Documents (distinct) died: they no longer pass."""
        inside = indexes[indexes < self.mask.shape[0]]
        passed = inside[self.mask[inside]]
        if not passed.shape[0]:
            return
        self.mask[passed] = False
        if self._docs is not None:
            self._docs = self._docs[self.mask[self._docs]]
        self.count -= passed.shape[0]


def filter_key(flt: SearchFilter) -> tuple[Any, ...]:
    """What of a filter the index answers (its moment is the SQL's to check)."""
    return (flt.kinds, flt.scopes, flt.session_id, flt.fact_roles, flt.turns_left_out)


class DocFilter:
    """Which documents pass a search filter (alive and active too), over `docs`."""

    def __init__(self, docs: Docs) -> None:
        self.docs = docs
        self.scopes, self.sessions, self.kinds, self.roles = (Codes() for _ in range(4))
        # each scope's documents (positions, ascending), in chunks merged when read
        self._scope_docs: dict[int, list[IntArray]] = defaultdict(list)
        self._masks: OrderedDict[tuple[Any, ...], Passing] = OrderedDict()
        self._tables: dict[tuple[Any, ...], Mask] = {}

    def register(self, base: int, columns: Sequence[Sequence[Any]]) -> None:
        """Code the filter columns (kind, scope, session, role) of the documents from `base`."""
        docs, end = self.docs, base + len(columns[0])
        docs.kind[base:end] = self.kinds.encode(columns[0])
        scopes = self.scopes.encode(columns[1])
        docs.scope[base:end] = scopes
        self._index_scopes(scopes, base)
        docs.session[base:end] = self.sessions.encode(columns[2])
        docs.role[base:end] = self.roles.encode(columns[3])

    def killed(self, indexes: IntArray) -> None:
        """The documents at `indexes` (distinct) died: they pass no cached mask any more (a
        dead document passes no filter, so clearing its place keeps every mask exact)."""
        for passing in self._masks.values():
            passing.kill(indexes)

    def passing(self, flt: SearchFilter) -> Passing | None:
        """Documents passing `flt` and their count; None when no document can.

        Cached per filter (the last `MASKS_KEPT` used) and extended over documents
        added since, so a write between two queries costs only its own rows; a
        document that dies is cleared in place. A filter not cached costs its
        scopes' documents, not every document's.
        """
        key = filter_key(flt)
        n = self.docs.n
        cached = self._masks.get(key)
        if cached is not None:
            self._masks.move_to_end(key)
            if cached.mask.shape[0] < n:
                fresh = self._mask_rows(flt, cached.mask.shape[0], n)
                if fresh is None:
                    return None
                cached.extend(*fresh)
            return cached if cached.count else None
        fresh = self._mask_rows(flt, 0, n)
        if fresh is None:
            return None
        passing = self._masks[key] = Passing(*fresh)
        while len(self._masks) > MASKS_KEPT:
            self._masks.popitem(last=False)
        return passing if passing.count else None

    def _mask_rows(
        self, flt: SearchFilter, lo: int, hi: int
    ) -> tuple[Mask, Int32Array | None] | None:
        """The mask over documents [lo, hi) and, with scopes, the positions passing,
        ascending. With scopes, computed over those scopes' documents only: a request
        asks for a few scopes of many, and a pass over every document costs milliseconds
        at 100k and tens of them at 1M."""
        docs = self.docs
        table = self._table(flt.kinds, flt.fact_roles)
        if table is None:
            return None
        rows: IntArray | slice = slice(lo, hi)
        if flt.scopes is not None:
            scopes = self.scopes.known(list(flt.scopes))
            if not scopes:
                return None
            rows = self._in_scopes(scopes, lo)
        keep = docs.alive[rows] & docs.active[rows] & table[docs.kind[rows], docs.role[rows]]
        if flt.session_id is not None:
            if flt.session_id not in self.sessions.codes:
                return None
            keep &= docs.session[rows] == self.sessions.codes[flt.session_id]
        if flt.turns_left_out is not None:
            keep &= ~self._turns_of(flt.turns_left_out, rows)
        if isinstance(rows, slice):
            return keep, None
        passed = np.sort(rows[keep]).astype(np.int32)  # each scope's are ascending, not all
        mask = np.zeros(hi - lo, np.bool_)
        mask[passed - lo] = True
        return mask, passed

    def _turns_of(self, scope: str, rows: IntArray | slice) -> Mask:
        """Which of `rows` are remembered turns of `scope` (`SearchFilter.turns_left_out`)."""
        docs = self.docs
        code = self.scopes.codes.get(scope)
        turns = self._table(("fact",), TURN_ROLES)
        if code is None or turns is None:
            return np.zeros(docs.kind[rows].shape[0], np.bool_)
        turn: Mask = (docs.scope[rows] == code) & turns[docs.kind[rows], docs.role[rows]]
        return turn

    def _table(self, kinds: Sequence[str], fact_roles: Sequence[str] | None) -> Mask | None:
        """Which (kind code, role code) pairs pass: one of `kinds`, and a fact only in one of
        `fact_roles` (None: any). One lookup per document instead of a set test per
        column; rebuilt when a kind or role is first seen. None when no kind is known."""
        kind_codes, role_codes = self.kinds.codes, self.roles.codes
        key = (tuple(kinds), fact_roles, len(kind_codes), len(role_codes))
        table = self._tables.get(key)
        if table is not None:
            return table
        wanted = self.kinds.known(list(kinds))
        if not wanted:
            return None
        table = np.zeros((len(kind_codes), max(len(role_codes), 1)), np.bool_)
        table[wanted, :] = True
        fact = kind_codes.get("fact")
        if fact_roles is not None and fact is not None and fact in wanted:
            table[fact, :] = False
            table[fact, self.roles.known(list(fact_roles))] = True
        if len(self._tables) >= MASKS_KEPT:
            self._tables.clear()
        self._tables[key] = table
        return table

    def _index_scopes(self, scopes: list[int], base: int) -> None:
        """Add new documents (positions from `base`, their scope codes) to their scopes'
        lists: grouped in Python, as a write brings a handful (a sort and a split of a
        few values cost more than the documents themselves)."""
        groups: dict[int, list[int]] = {}
        for position, code in enumerate(scopes, base):
            found = groups.get(code)
            if found is None:
                groups[code] = [position]
            else:
                found.append(position)
        for code, positions in groups.items():
            self._scope_docs[code].append(np.array(positions, np.int64))

    def _in_scopes(self, codes: Sequence[int], lo: int) -> IntArray:
        """Positions from `lo` of the documents of these scopes (each scope's ascending)."""
        found = []
        for code in codes:
            chunks = self._scope_docs.get(code)
            if not chunks:
                continue
            if len(chunks) > 1:
                chunks[:] = [np.concatenate(chunks)]
            positions = chunks[0]
            found.append(positions[np.searchsorted(positions, lo) :] if lo else positions)
        if not found:
            return np.zeros(0, np.int64)
        return np.concatenate(found) if len(found) > 1 else found[0]
