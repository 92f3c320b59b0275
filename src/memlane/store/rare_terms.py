"""Rare words shared between documents (`SearchIndex.rare_term_hits`), the same for every
backend but for finding each word's holders.

A backend answers one question (`RareQuery`): which documents passing the filter
hold each word, for the words few enough of them hold (`_rare_holders`). What
is here is the rest: the question's checks, the bound a share sets
(`rare_bound`), the rarest words first within a budget of documents (`rarest`),
and a document counted only where its own text says the word (`own_holders`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from memlane.store.analysis import might_say, term_set
from memlane.store.arguments import RareBounds
from memlane.store.base import SearchFilter
from memlane.store.rows import Row, hit_from_row
from memlane.store.sql import D, SqlStore
from memlane.types import Hit

Holders = tuple[Mapping[str, Sequence[Any]], Mapping[Any, Row]]
"""Each word's holders (row keys, oldest first), and the rows of those that pass the filter."""


@dataclass(frozen=True, slots=True)
class RareQuery:
    """The question `rare_term_hits` asks a backend (its arguments, the words once each)."""

    words: tuple[str, ...]
    flt: SearchFilter
    max_df: int
    max_share: float
    limit: int | None

    @property
    def answerable(self) -> bool:
        """Whether any document could answer: some words, a positive bound, some kinds and
        scopes."""
        no_scope = self.flt.scopes is not None and not self.flt.scopes
        return bool(self.words and self.max_df > 0 and self.flt.kinds) and not no_scope


class SqlRareTerms(SqlStore[D]):
    """`rare_term_hits` for every backend, over the backend's `_rare_holders`."""

    @abstractmethod
    def _rare_holders(self, query: RareQuery) -> Holders:
        """The holders of the rarest of the query's words (`rarest`, within `query.limit`)
        and their rows that pass `query.flt`."""

    def rare_term_hits(
        self, words: Sequence[str], flt: SearchFilter, **bounds: Unpack[RareBounds]
    ) -> dict[str, list[Hit]]:
        query = RareQuery(
            tuple(dict.fromkeys(words)),
            flt,
            bounds["max_df"],
            bounds.get("max_share", 1.0),
            bounds.get("limit"),
        )
        if not query.answerable:
            return {}
        return own_holders(*self._rare_holders(query))


def rare_bound(max_df: int, max_share: float, visible: int) -> int:
    """How many holders a rare word may have among `visible` documents: at most `max_df`,
    and at most `max_share` of them (in a handful of documents no word is rare)."""
    return min(max_df, int(max_share * visible))


def rarest(held: Mapping[str, Sequence[Any]], limit: int | None) -> dict[str, Sequence[Any]]:
    """The words with the fewest holders first, as long as their holders together stay
    within `limit` (None: all): the rarer a shared word, the stronger the link, and a
    request reads a bounded number of documents however many words its seeds have."""
    if limit is None:
        return dict(held)
    out: dict[str, Sequence[Any]] = {}
    used = 0
    for word in sorted(held, key=lambda w: (len(held[w]), w)):
        used += len(held[word])
        if used > limit:
            break
        out[word] = held[word]
    return out


def own_holders(held: Mapping[str, Sequence[Any]], rows: Mapping[Any, Row]) -> dict[str, list[Hit]]:
    """`SearchIndex.rare_term_hits` from each word's holders (row keys, oldest first) and
    their rows (those that passed the filter): only a document whose own text says the
    word holds it (a turn's indexed document also has its neighbours' words)."""
    lowered: dict[Any, str] = {}
    said: dict[Any, frozenset[str]] = {}
    hits: dict[Any, Hit] = {}
    out: dict[str, list[Hit]] = {}
    for word, keys in held.items():
        for key in keys:
            row = rows.get(key)
            if row is None:
                continue
            low = lowered.get(key)
            if low is None:
                low = lowered[key] = row["text"].lower()
            if not might_say(low, word):
                continue  # most holders only hold it through a neighbour: no analysis
            words = said.get(key)
            if words is None:
                words = said[key] = term_set(row["text"])
            if word in words:
                hit = hits.get(key)
                if hit is None:
                    hit = hits[key] = hit_from_row(row, 0.0)
                out.setdefault(word, []).append(hit)
    return out
