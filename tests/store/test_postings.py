"""A keyword search over few of many documents looks those documents up in the postings:
the same hits, scores and rare-word holders as masking every posting, and FTS5's BM25."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memlane.store import SearchFilter
from memlane.store.rare_terms import RareQuery
from memlane.store.sqlite import SQLiteStore, keyword_index, postings
from memlane.store.sqlite.doc_filter import filter_key
from memlane.store.sqlite.keyword_index import KeywordIndex
from memlane.types import FactRole
from tests.store.fts5_reference import fts5_reference
from tests.store.test_keyword_index import QUERIES, fact, sentences

CONVERSATIONS = 40
ASKING = range(0, CONVERSATIONS, 5)
"""The conversations that search, round after round: with the filter over every scope,
fewer than `MASKS_KEPT`, so their cached answers are extended by new documents and lose
the ones that die."""
LOOK_UP = 0  # `FEW` that looks every filter's documents up in the postings
SCAN = 10**9  # `FEW` that masks every posting, as the index did before
CHOSEN = postings.FEW  # each way where it is cheaper
TAIL_MIN = 200
"""The tail's bound in these tests: a round writes 25 new entries and re-indexes some
60 more (rewritten entries and their neighbours), so the tail takes a round or two and
is merged the next: rounds search arrays with a tail, and arrays just merged."""


class Memory:
    """Many conversations' turn entries, a namespace's and the global scope's facts; a
    round of writes adds entries, rewrites some (moving a few to another conversation)
    and deletes others: the index then has arrays, a tail and dead documents."""

    def __init__(self, path: Path) -> None:
        self.store = SQLiteStore(path)
        self.rng = random.Random(7)
        self.texts = sentences(8, 100_000)
        self.count = 0
        self.add(CONVERSATIONS * 20)
        for i, text in zip(range(30), self.texts, strict=False):
            self.store.put_fact(fact(f"ns{i}", text, scope="ns"))
            self.store.put_fact(fact(f"g{i}", text, scope="global"))

    def add(self, entries: int) -> None:
        with self.store.batch():
            for _ in range(entries):
                self.put(f"e{self.count}", self.count % CONVERSATIONS)
                self.count += 1

    def put(self, ref: str, conversation: int) -> None:
        role: FactRole = "user" if self.rng.random() < 0.5 else "assistant"
        self.store.put_fact(fact(ref, next(self.texts), scope=f"conv:{conversation}", role=role))

    def churn(self) -> None:
        self.add(25)
        with self.store.batch():
            for _ in range(12):
                self.put(f"e{self.rng.randrange(self.count)}", self.rng.randrange(CONVERSATIONS))
            for _ in range(6):
                self.store.delete_fact(f"e{self.rng.randrange(self.count)}")


def scopes(conversation: int) -> tuple[str, ...]:
    return (f"conv:{conversation}", "ns", "global")


def request_filter(conversation: int) -> SearchFilter:
    return SearchFilter(kinds=("fact",), scopes=scopes(conversation))


FILTERS = [
    *(request_filter(conversation) for conversation in ASKING),
    SearchFilter(kinds=("fact",), fact_roles=("user",)),  # every scope: no list kept at first
]


def answers(index: KeywordIndex, flt: SearchFilter) -> list[object]:
    found: list[object] = []
    for query in QUERIES:
        words = query.split()
        found.append(index.search(words, flt, 25))
        for max_df, max_share in ((20, 0.5), (10**6, 1.0)):  # rare words, then every word
            found.append(index.holders(RareQuery(tuple(words), flt, max_df, max_share, None)))
    return found


def test_a_search_over_few_documents_equals_the_scan_of_every_posting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_index, "TAIL_MIN", TAIL_MIN)  # merges, then a tail
    monkeypatch.setattr(postings, "HELD_CHUNK", 64)  # holders found over many chunks
    monkeypatch.setattr(postings, "LOOKUP_CHUNK", 16)
    memory = Memory(tmp_path / "memlane.db")
    raw = sqlite3.connect(memory.store.path, isolation_level=None)
    index = KeywordIndex()
    index.refresh(raw)
    tails = dead = hits = held = 0
    for round_ in range(8):
        memory.churn()
        index.refresh(raw)
        tails += bool(index._tail)
        dead += bool(index._dead.count)
        for flt in FILTERS:
            monkeypatch.setattr(postings, "FEW", SCAN)
            scanned = answers(index, flt)
            for few in (LOOK_UP, CHOSEN):
                monkeypatch.setattr(postings, "FEW", few)
                assert answers(index, flt) == scanned, (round_, flt, few)
            hits += sum(len(found) for found in scanned if isinstance(found, list))
            held += sum(len(found) for found in scanned if isinstance(found, dict))
    assert tails  # the rounds searched over a tail
    assert dead  # and dead documents
    assert hits > 500
    assert held > 50
    raw.close()
    memory.store.close()


@pytest.mark.parametrize("few", [LOOK_UP, SCAN])
def test_a_search_over_one_conversation_of_many_ranks_as_fts5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, few: int
) -> None:
    """Only the filter's documents are scored, but BM25's statistics are the whole
    table's (dead documents left out of each word's count, either way it is counted)."""
    monkeypatch.setattr(keyword_index, "TAIL_MIN", TAIL_MIN)
    monkeypatch.setattr(postings, "FEW", few)
    memory = Memory(tmp_path / "memlane.db")
    store = memory.store
    tails = 0
    for round_ in range(6):
        memory.churn()
        with fts5_reference(store.path) as fts5:
            for conversation in ASKING:
                for query in QUERIES:
                    hits = store.keyword_search(query, request_filter(conversation), limit=25)
                    assert [(h.ref, round(h.score, 9)) for h in hits] == fts5.ranking(
                        query, 25, scopes(conversation)
                    ), (round_, conversation, query)
        tails += bool(store._keywords._tail)
    assert tails  # some rounds searched over a tail
    store.close()


def test_rare_holders_after_a_search_are_those_a_fresh_index_finds(tmp_path: Path) -> None:
    """A search's findings answer the rare-word question for its words and filter: the
    same holders, round after round of writes, changes and deletions, as an index that
    never searched."""
    memory = Memory(tmp_path / "memlane.db")
    raw = sqlite3.connect(memory.store.path, isolation_level=None)
    index = KeywordIndex()
    index.refresh(raw)
    reused = 0
    for _ in range(6):
        memory.churn()
        index.refresh(raw)
        fresh = KeywordIndex()
        fresh.refresh(raw)
        for flt in FILTERS:
            for query in QUERIES:
                words = query.split()
                index.search(words, flt, 25)
                for max_df, max_share in ((20, 0.5), (3, 1.0), (10**6, 1.0)):
                    asked = RareQuery(tuple(words), flt, max_df, max_share, None)
                    assert index.holders(asked) == fresh.holders(asked), (flt, query, max_df)
                    reused += any(
                        index._seen.held(filter_key(flt), index._vocab[w], max_df) is not False
                        for w in words
                        if w in index._vocab
                    )
    assert reused  # the answers came from the searches' findings
    raw.close()
    memory.store.close()


def test_a_change_to_the_index_forgets_what_searches_found(tmp_path: Path) -> None:
    """A deleted memory is never a rare word's holder again, and a new one is one at once,
    though a search had found the word's holders just before."""
    store = SQLiteStore(tmp_path / "memlane.db")
    for i in range(3):
        store.put_fact(fact(f"z{i}", f"zebra note {i}", scope="conv:1"))
    for i in range(30):
        store.put_fact(fact(f"o{i}", f"other words {i}", scope="conv:1"))
    raw = sqlite3.connect(store.path, isolation_level=None)
    index = KeywordIndex()
    index.refresh(raw)
    flt = SearchFilter(kinds=("fact",), scopes=("conv:1",))
    asked = RareQuery(("zebra",), flt, 20, 1.0, None)

    index.search(["zebra"], flt, 10)
    assert index._seen.held(filter_key(flt), index._vocab["zebra"], 20) is not False
    assert len(index.holders(asked)["zebra"]) == 3
    store.delete_fact("z0")
    index.refresh(raw)
    assert len(index.holders(asked)["zebra"]) == 2

    index.search(["zebra"], flt, 10)
    store.put_fact(fact("z9", "zebra again", scope="conv:1"))
    index.refresh(raw)
    assert len(index.holders(asked)["zebra"]) == 3
    raw.close()
    store.close()
