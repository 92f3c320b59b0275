"""Entity-aware expansion: the stage on its own, and through `search` over a real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.config import Settings
from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.expand import expand, seed_words
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.store import SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact, Hit

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def cand(ref: str, relevance: float, text: str) -> Candidate:
    return Candidate("fact", ref, "ns:r", None, text, NOW, relevance=relevance, score=relevance)


def hit(ref: str, text: str) -> Hit:
    return Hit("fact", ref, "ns:r", None, text, 0.0, NOW)


def test_a_memory_saying_a_seeds_rare_word_is_lifted_or_added() -> None:
    candidates = [
        cand("a", 1.0, "Caroline moved from her home country"),
        cand("b", 0.6, "Melanie paints on weekends"),
        cand("c", 0.5, "the weather was fine"),
        cand("d", 0.0, "a long walk"),
    ]
    holders = {"country": [hit("a", candidates[0].text), hit("x", "my home country, Sweden")]}
    out = expand(candidates, holders, weight=0.2)
    assert [c.ref for c in out] == ["a", "b", "c", "x"]  # x: 0 + 0.2 × 1.0; d falls off
    assert out[0].relevance == 1.0
    assert out[-1].relevance == 0.2
    assert all(0.0 <= c.relevance <= 1.0 and c.score == c.relevance for c in out)
    assert out[3].keyword_rank is None  # no first-stage list found it

    lifted = expand(candidates, {"country": [hit("c", "back in my home country")]}, weight=0.2)
    assert [c.ref for c in lifted][:3] == ["a", "c", "b"]  # 0.5 + 0.2 passes 0.6


def test_only_the_seeds_link_and_a_link_needs_a_word_of_theirs() -> None:
    candidates = [
        cand("a", 1.0, "Sweden"),
        cand("b", 0.9, "Lisbon"),
        cand("c", 0.8, "Oslo"),
        cand("d", 0.0, "filler"),
    ]
    oslo = {"oslo": [hit("y", "we flew to Oslo")]}
    assert expand(candidates, oslo, seeds=2) == candidates  # c is not a seed
    assert [c.ref for c in expand(candidates, oslo, seeds=3)] == ["a", "b", "c", "y"]
    assert expand(candidates, {"paris": [hit("z", "Paris")]}) == candidates
    assert expand(candidates, {"sweden": [hit("z", "Sweden")]}, weight=0.0) == candidates
    assert expand([], {"sweden": [hit("z", "Sweden")]}) == []


def test_seed_words_are_the_analysers_terms_of_the_best_candidates() -> None:
    candidates = [
        cand("a", 1.0, "Running in Oslo"),
        cand("b", 0.5, "Oslo again"),
        cand("c", 0.1, "x"),
    ]
    assert seed_words(candidates) == ["oslo", "runn", "again"]


def turn(ref: str, text: str, minute: int, conversation: str = "c1") -> Fact:
    when = NOW - timedelta(days=30) + timedelta(minutes=minute)
    role = "user" if minute % 4 == 0 else "assistant"
    return Fact(ref, f"conv:{conversation}", conversation, role, text, when, when)  # type: ignore[arg-type]


async def test_search_brings_the_turn_that_shares_a_rare_word_with_the_best_hit(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    turns = [
        ("t0", "I've known these friends for four years, since I moved from my home country"),
        ("t1", "That is a long time to keep in touch"),
        # far from the first two: neither is its neighbour, so its document holds neither;
        # and enough turns that a word a handful of them say is rare among them
        *[(f"f{i}", f"we talked about the garden and the weather, day {i}") for i in range(200)],
        ("t2", "My grandma gave me this necklace in Sweden, where I grew up with my friends"),
        ("t3", "It is beautiful"),
    ]
    for minute, (ref, text) in enumerate(turns):
        sqlite_store.put_fact(turn(ref, text, minute * 2))
    sqlite_store.put_fact(turn("elsewhere", "my friends in Sweden", 0, conversation="c2"))
    question = "Which home country did I move from four years ago?"
    base = settings.model_copy(update={"memory_entity_expansion": False, "memory_top_k": 3})
    off = await search(Runtime(base, sqlite_store), question, scopes=["conv:c1"], now=NOW)
    on_settings = base.model_copy(update={"memory_entity_expansion": True})
    on = await search(Runtime(on_settings, sqlite_store), question, scopes=["conv:c1"], now=NOW)
    off_refs, on_refs = [c.ref for c in off], [c.ref for c in on]
    assert off_refs[0] == on_refs[0] == "t0"
    assert "t2" not in off_refs  # it shares no word with the question...
    assert "t2" in on_refs  # ...but "friends" with the best hit, and few say it
    assert {c.scope for c in on} == {"conv:c1"}  # the other conversation's friends stay there


async def test_in_a_handful_of_memories_no_word_is_rare(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    facts = ["The user lives in Lisbon", "The user went to the Oceanarium", "The user likes tea"]
    for i, text in enumerate(facts):
        sqlite_store.put_fact(Fact(f"m{i}", "ns:me", "c", "memory", text, NOW, NOW))
    rt = Runtime(settings, sqlite_store)
    assert rt.settings.memory_entity_expansion
    found = await search(rt, "Lisbon", scopes=["ns:me"], now=NOW)
    assert [c.ref for c in found] == ["m0"]  # "user" is in all three: it links nothing
    flt = SearchFilter(kinds=("fact",), scopes=("ns:me",))
    assert len(sqlite_store.rare_term_hits(["user"], flt, max_df=20)["user"]) == 3
    assert sqlite_store.rare_term_hits(["user"], flt, max_df=20, max_share=0.1) == {}
