"""Fact extraction: the prompt's parser (good and bad output), retries and the LLM-down path."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.engine.memory.extract import ATTEMPTS, FACT_PROMPT, extract_facts, parse_facts
from memlane.engine.memory.jsonout import ModelOutputError
from memlane.text.llm import LLMError
from tests.support.text import ScriptedLLM

SAID = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ('["The user lives in Lyon"]', ["The user lives in Lyon"]),
        ("[]", []),
        ('{"facts": ["The user has a dog named Rex"]}', ["The user has a dog named Rex"]),
        ('```json\n["The user is vegan"]\n```', ["The user is vegan"]),
        ('["a", "b", "c", "d"]', ["a", "b", "c"]),
        ('["  spaced   out  ", "spaced out", ""]', ["spaced out"]),
    ],
)
def test_parser_accepts_good_output(answer: str, facts: list[str]) -> None:
    assert parse_facts(answer) == facts


@pytest.mark.parametrize(
    "answer",
    ["Sure! The user lives in Lyon.", '{"fact": "x"}', "[1, 2]", '"just a string"', "[{]"],
)
def test_parser_rejects_bad_output(answer: str) -> None:
    with pytest.raises(ModelOutputError):
        parse_facts(answer)


async def test_only_the_user_text_is_sent(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push('["The user\'s wife is named Anne"]')
    facts = await extract_facts(scripted_llm, "My wife is Anne", model="m", said_at=SAID)
    assert facts == ["The user's wife is named Anne"]
    (call,) = scripted_llm.calls
    assert call.messages[0]["content"] == FACT_PROMPT
    assert "My wife is Anne" in call.messages[1]["content"]
    assert call.model == "m"


async def test_malformed_answers_are_retried_then_recovered(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push("not json", '["The user plays chess"]')
    assert await extract_facts(scripted_llm, "I play chess", model="m", said_at=SAID) == [
        "The user plays chess"
    ]
    assert len(scripted_llm.calls) == 2


async def test_three_malformed_answers_give_nothing(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push("nope", "still nope", "no", '["never asked"]')
    assert await extract_facts(scripted_llm, "I play chess", model="m", said_at=SAID) == []
    assert len(scripted_llm.calls) == ATTEMPTS == 3


async def test_llm_down_gives_nothing_without_retrying(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(LLMError("connection refused"))
    assert await extract_facts(scripted_llm, "I play chess", model="m", said_at=SAID) == []
    assert len(scripted_llm.calls) == 1


async def test_empty_message_asks_nothing(scripted_llm: ScriptedLLM) -> None:
    assert await extract_facts(scripted_llm, "   ", model="m", said_at=SAID) == []
    assert scripted_llm.calls == []


async def test_the_model_is_told_the_date_and_relative_dates_it_leaves_are_resolved(
    scripted_llm: ScriptedLLM,
) -> None:
    scripted_llm.push('["The user went hiking yesterday", "On 2026-03-01 the user bought boots"]')
    facts = await extract_facts(scripted_llm, "I went hiking yesterday", model="m", said_at=SAID)
    assert facts == ["The user went hiking on 2026-03-09", "On 2026-03-01 the user bought boots"]
    (call,) = scripted_llm.calls
    assert "written on 2026-03-10 (Tuesday)" in call.messages[1]["content"]
    assert "resolve" in FACT_PROMPT
    assert "yesterday" in FACT_PROMPT
