"""Rolling summary (prompt parser, extractive fallback) and eviction order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.engine.memory.evict import choose_evictions
from memlane.engine.memory.summary import (
    MAX_SUMMARY_CHARS,
    SUMMARY_PROMPT,
    fallback_summary,
    parse_summary,
    summary_id,
    update_summary,
)
from memlane.text.llm import LLMError
from memlane.types import Fact
from tests.support.text import ScriptedLLM

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_summary_parser() -> None:
    assert parse_summary("  The user lives in Lyon.  ") == "The user lives in Lyon."
    assert parse_summary("```\nThe user lives in Lyon.\n```") == "The user lives in Lyon."
    assert parse_summary("   ") == ""


async def test_summary_update_sends_previous_and_new(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push("The user lives in Oslo and has a dog.")
    text = await update_summary(
        scripted_llm, "The user lives in Lyon.", ["User moved to Oslo"], model="m"
    )
    assert text == "The user lives in Oslo and has a dog."
    (call,) = scripted_llm.calls
    assert call.messages[0]["content"] == SUMMARY_PROMPT
    assert "PREVIOUS:\nThe user lives in Lyon." in call.messages[1]["content"]
    assert "- User moved to Oslo" in call.messages[1]["content"]


async def test_summary_falls_back_to_extractive_when_the_llm_fails(
    scripted_llm: ScriptedLLM,
) -> None:
    scripted_llm.push(LLMError("down"))
    text = await update_summary(scripted_llm, "- User likes tea", ["User has a dog"], model="m")
    assert text == "- User likes tea\n- User has a dog"


async def test_empty_answer_falls_back(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push("   ")
    assert await update_summary(scripted_llm, "", ["a"], model="m") == "- a"


def test_fallback_is_bounded_and_drops_oldest_lines() -> None:
    previous = "\n".join(f"- old fact number {i}" for i in range(500))
    text = fallback_summary(previous, ["newest"])
    assert len(text) <= MAX_SUMMARY_CHARS
    assert text.endswith("- newest")
    assert "old fact number 0\n" not in text


def test_summary_id_is_stable_per_conversation() -> None:
    assert summary_id("s1") == summary_id("s1") != summary_id("s2")


def entry(i: int, role: str = "memory", deleted: bool = False) -> Fact:
    when = T0 + timedelta(minutes=i)
    return Fact(
        id=f"e{i}",
        scope="conv:s",
        conversation_id="s",
        role=role,  # type: ignore[arg-type]
        text=str(i),
        created_at=when,
        updated_at=when,
        deleted=deleted,
    )


def test_eviction_takes_oldest_facts_and_turns_and_spares_summaries() -> None:
    entries = [
        entry(0, "summary"),
        entry(3, "user"),
        entry(1),
        entry(2, "assistant"),
        entry(4),
        entry(5, deleted=True),
    ]
    evicted = choose_evictions(entries, max_entries=2)
    assert [e.id for e in evicted] == ["e1", "e2"]


def test_no_eviction_within_the_cap() -> None:
    assert choose_evictions([entry(1), entry(2), entry(0, "summary")], max_entries=2) == []
