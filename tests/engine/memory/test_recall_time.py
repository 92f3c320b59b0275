"""What recall shows about time: which questions ask about change, and how memories are
labelled with when they were true (or said)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.engine.memory.block import Recalled, render
from memlane.engine.memory.recall import asks_about_change
from memlane.engine.retrieval.candidates import Candidate
from memlane.types import Fact

JAN = datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
MAR = datetime(2026, 3, 10, 18, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "query",
    [
        "Where did I live before?",
        "What editor did I use to have?",
        "Which team was I previously on?",
        "Since when do I work at ACME?",
        "Has my address changed?",
        "When did we switch to uv?",
        "I no longer drink coffee, right?",
        "What was my job originally",
        "How long have I lived here?",
    ],
)
def test_questions_about_change(query: str) -> None:
    assert asks_about_change(query)


@pytest.mark.parametrize(
    "query",
    ["Where do I live?", "What is my wife's name?", "Which config file is used?", "beforehand"],
)
def test_questions_about_now(query: str) -> None:
    assert not asks_about_change(query)


def recalled(fact: Fact, *, dated: bool = False) -> Recalled:
    candidate = Candidate("fact", fact.id, fact.scope, None, fact.text, fact.created_at)
    return Recalled(fact.role, fact.text, candidate, fact, dated)


def entry(role: str, text: str, **fields: object) -> Fact:
    return Fact(
        id=text[:8], scope="ns:me", conversation_id="c", role=role,  # type: ignore[arg-type]
        text=text, created_at=JAN, updated_at=JAN, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_labels_say_when_each_memory_was_true() -> None:
    berlin = entry("memory", "The user lives in Berlin", valid_to=MAR, replaced_by="x")
    lisbon = entry("memory", "The user lives in Lisbon", valid_from=MAR)
    turn = entry("user", "We decided on PostgreSQL")
    block = render([recalled(berlin, dated=True), recalled(lisbon, dated=True), recalled(turn)])
    assert "[memory, 2026-01-15 → 2026-03-10, replaced] The user lives in Berlin" in block
    assert "[memory, since 2026-03-10] The user lives in Lisbon" in block
    assert "[user, 2026-01-15 09:30 UTC] We decided on PostgreSQL" in block
    plain = render([recalled(lisbon)])  # a question about now: a current fact stays plain
    assert "[memory] The user lives in Lisbon" in plain
