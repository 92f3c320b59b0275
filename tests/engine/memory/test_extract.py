"""Fact extraction: the prompt's parser (good and bad output), retries and the LLM-down path."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memlane.engine.memory.extract import (
    ATTEMPTS,
    FACT_PROMPT,
    MAX_BATCH_CHARS,
    Said,
    extract_batch,
    extract_facts,
    parse_batch,
    parse_facts,
)
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


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        (
            '[{"message": 1, "fact": "The user lives in Lyon"},'
            ' {"message": 2, "fact": "The user has a dog"}]',
            [(0, "The user lives in Lyon"), (1, "The user has a dog")],
        ),
        ('["The user is vegan"]', [(1, "The user is vegan")]),  # a plain string: the latest
        (
            '[{"message": 1, "fact": "The user prefers tabs", "about": "user"},'
            ' {"message": 2, "fact": "The project deploys to fly.io", "about": "project"}]',
            [(0, "The user prefers tabs", "user"), (1, "The project deploys to fly.io")],
        ),
        (  # unknown or odd labels stay in the project (never leak); case is forgiven
            '[{"message": 1, "fact": "a", "about": "everyone"},'
            ' {"message": 1, "fact": "b", "about": 1},'
            ' {"message": 2, "fact": "c", "about": "User"}]',
            [(0, "a"), (0, "b"), (1, "c", "user")],
        ),
        ('[{"message": "1", "fact": "a"}, {"message": 7, "fact": "b"}]', [(0, "a"), (1, "b")]),
        ('{"facts": [{"message": 2, "text": "c"}]}', [(1, "c")]),
        ('[{"message": 1, "fact": "a"}, {"message": 1, "fact": "a"}]', [(0, "a")]),
        (
            json.dumps([{"message": 1, "fact": f"f{i}"} for i in range(5)]),
            [(0, "f0"), (0, "f1"), (0, "f2")],  # at most three per message
        ),
    ],
)
def test_batch_parser_accepts_good_output(answer: str, found: list[tuple[Any, ...]]) -> None:
    # a fact with no label is about the project
    assert parse_batch(answer, 2) == [(*f, "project") if len(f) == 2 else f for f in found]


@pytest.mark.parametrize(
    "answer",
    [
        '[{"message": 1}]',
        '[{"message": 1, "fact": 3}]',
        '[{"message": 1, "about": "user"}]',
        "[[1]]",
        "not json",
        '{"m": []}',
    ],
)
def test_batch_parser_rejects_bad_output(answer: str) -> None:
    with pytest.raises(ModelOutputError):
        parse_batch(answer, 2)


async def test_a_batch_is_one_call_each_fact_dated_by_its_own_message(
    scripted_llm: ScriptedLLM,
) -> None:
    later = datetime(2026, 3, 12, 9, 0, tzinfo=UTC)
    scripted_llm.push(
        '[{"message": 1, "fact": "The user went hiking yesterday"},'
        ' {"message": 2, "fact": "The user bought boots yesterday"}]'
    )
    said = [Said("I went hiking yesterday", SAID), Said("I bought boots yesterday", later)]
    found = (await extract_batch(scripted_llm, said, model="m")).facts
    assert found == [
        (0, "The user went hiking on 2026-03-09", "project"),
        (1, "The user bought boots on 2026-03-11", "project"),
    ]
    (call,) = scripted_llm.calls
    body = call.messages[1]["content"]
    assert "User message 1, written on 2026-03-10" in body
    assert "User message 2, written on 2026-03-12" in body


async def test_a_batch_too_long_for_one_call_is_asked_in_several(
    scripted_llm: ScriptedLLM,
) -> None:
    scripted_llm.push('["The user likes tea"]', '["The user likes coffee"]')
    long = "tea " * (MAX_BATCH_CHARS // 4)
    said = [Said(long, SAID), Said("I like coffee", SAID)]
    found = (await extract_batch(scripted_llm, said, model="m")).facts
    assert found == [(0, "The user likes tea", "project"), (1, "The user likes coffee", "project")]
    assert len(scripted_llm.calls) == 2


async def test_the_label_survives_a_batch_split_and_dating(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(
        '[{"message": 1, "fact": "The user started running yesterday", "about": "user"}]',
        '[{"message": 1, "fact": "The project builds with make", "about": "project"}]',
    )
    long = "run " * (MAX_BATCH_CHARS // 4)
    found = (
        await extract_batch(scripted_llm, [Said(long, SAID), Said("make", SAID)], model="m")
    ).facts
    assert found == [
        (0, "The user started running on 2026-03-09", "user"),
        (1, "The project builds with make", "project"),
    ]


def test_the_prompt_asks_whom_each_fact_is_about() -> None:
    assert '"about": "user"' in FACT_PROMPT
    assert '"project"' in FACT_PROMPT
    assert "When unsure" in FACT_PROMPT
