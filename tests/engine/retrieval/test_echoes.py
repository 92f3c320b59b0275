"""A fact ranks above the turns that merely echo it (`engine.retrieval.echoes`)."""

from __future__ import annotations

from datetime import UTC, datetime

from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.echoes import facts_over_echoes

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def cand(ref: str, text: str, relevance: float, role: str) -> Candidate:
    return Candidate(
        "fact", ref, "ns:r", None, text, NOW, relevance=relevance, score=relevance, role=role
    )


def test_a_fact_goes_just_above_the_best_turn_that_echoes_it() -> None:
    ranked = facts_over_echoes(
        [
            cand("said", "I prefer tabs.", 1.0, "user"),
            cand("echo", "Noted: you prefer tabs.", 0.88, "assistant"),
            cand("hello", "Hello.", 0.6, "user"),
            cand("fact", "The user prefers tabs", 0.05, "memory"),
        ]
    )
    assert [c.ref for c in ranked] == ["fact", "said", "echo", "hello"]
    assert ranked[0].relevance == 1.0  # the echo's relevance, not a made-up one


def test_a_turn_about_something_else_keeps_its_place() -> None:
    ranked = facts_over_echoes(
        [
            cand("deploy", "We deploy to the staging cluster with tabs off", 1.0, "user"),
            cand("fact", "The user's wife is named Anne", 0.2, "memory"),
        ]
    )
    assert [c.ref for c in ranked] == ["deploy", "fact"]
    assert ranked[1].relevance == 0.2


def test_most_of_the_facts_words_make_an_echo() -> None:
    ranked = facts_over_echoes(
        [
            cand("said", "My wife is Anne, by the way", 0.9, "user"),
            cand("fact", "The user's wife is named Anne", 0.3, "memory"),
        ]
    )
    assert [c.ref for c in ranked] == ["fact", "said"]


def test_turns_alone_are_ranked_as_before() -> None:
    turns = [
        cand("a", "I prefer tabs.", 1.0, "user"),
        cand("b", "Tabs it is.", 0.5, "assistant"),
        cand("c", "Tabs again", 0.5, "user"),
    ]
    assert facts_over_echoes(turns) == turns
