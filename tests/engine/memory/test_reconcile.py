"""Reconciliation: each decision, short-id mapping, and each safeguard."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memlane.engine.memory.jsonout import ModelOutputError
from memlane.engine.memory.reconcile import (
    RECONCILE_PROMPT,
    Decision,
    Plan,
    pair_replacements,
    parse_decisions,
    plan_from,
    reconcile,
)
from memlane.text.llm import LLMError
from memlane.types import Fact
from tests.support.text import ScriptedLLM

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def existing(*texts: str) -> list[Fact]:
    return [
        Fact(
            id=f"real-{i}",
            scope="ns:r",
            conversation_id="s",
            role="memory",
            text=t,
            created_at=NOW,
            updated_at=NOW,
        )
        for i, t in enumerate(texts)
    ]


SHORT = {"0": "real-0", "1": "real-1"}


def test_parser_maps_short_ids_and_reads_every_event() -> None:
    answer = json.dumps(
        [
            {"event": "ADD", "text": "The user has a cat"},
            {"event": "UPDATE", "id": "0", "text": "The user hates pizza"},
            {"event": "DELETE", "id": 1},
            {"event": "NONE", "id": "1"},
        ]
    )
    assert parse_decisions(answer, SHORT) == [
        Decision("ADD", "The user has a cat"),
        Decision("UPDATE", "The user hates pizza", "real-0"),
        Decision("DELETE", "", "real-1"),
        Decision("NONE", "", "real-1"),
    ]


def test_parser_drops_invented_ids_and_empty_texts() -> None:
    answer = json.dumps(
        [
            {"event": "UPDATE", "id": "9", "text": "x"},
            {"event": "DELETE", "id": "real-0"},
            {"event": "ADD", "text": ""},
            {"event": "MERGE", "id": "0"},
        ]
    )
    assert parse_decisions(answer, SHORT) == []


@pytest.mark.parametrize("answer", ["I think ADD", '{"event": "ADD"}', '["ADD"]', "[{"])
def test_parser_rejects_bad_output(answer: str) -> None:
    with pytest.raises(ModelOutputError):
        parse_decisions(answer, SHORT)


async def test_add(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push('[{"event": "NONE", "id": "0"}, {"event": "ADD", "text": "User has a dog"}]')
    plan = await reconcile(scripted_llm, ["User has a dog"], existing("User likes tea"), model="m")
    assert (plan.adds, plan.updates, plan.deletes) == (["User has a dog"], [], [])
    (call,) = scripted_llm.calls
    assert call.messages[0]["content"] == RECONCILE_PROMPT
    assert '"id": "0", "text": "User likes tea"' in call.messages[1]["content"]
    assert "real-0" not in call.messages[1]["content"]


async def test_update(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push('[{"event": "UPDATE", "id": "0", "text": "User hates pizza"}]')
    plan = await reconcile(
        scripted_llm, ["User hates pizza"], existing("User loves pizza"), model="m"
    )
    assert (plan.adds, plan.updates, plan.deletes) == ([], [("real-0", "User hates pizza")], [])


async def test_delete_with_its_replacement(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(
        '[{"event": "DELETE", "id": "1"}, {"event": "ADD", "text": "User moved to Oslo"}]'
    )
    plan = await reconcile(
        scripted_llm,
        ["User moved to Oslo"],
        existing("User likes tea", "User lives in Lyon"),
        model="m",
    )
    # the delete came with its replacement: it is applied as an update (the old fact closed)
    assert (plan.adds, plan.updates, plan.deletes, plan.reason) == (
        [],
        [("real-1", "User moved to Oslo")],
        [],
        "model",
    )


def test_deletes_pair_with_the_add_about_the_same_thing() -> None:
    texts = {"a": "The user lives in Berlin", "b": "The user likes tea"}
    plan = pair_replacements(
        Plan(adds=["The user has a dog", "The user lives in Lisbon"], deletes=["a", "b"]), texts
    )
    assert plan.updates == [("a", "The user lives in Lisbon")]
    assert (plan.adds, plan.deletes) == (["The user has a dog"], ["b"])


def test_a_delete_without_a_clear_replacement_stays_a_delete() -> None:
    texts = {"a": "The user likes tea"}
    unrelated = Plan(adds=["The user has a dog", "The user has a cat"], deletes=["a"])
    assert pair_replacements(unrelated, texts) == unrelated
    tie = Plan(adds=["The user drinks green tea", "The user drinks black tea"], deletes=["a"])
    assert pair_replacements(tie, texts) == tie  # as close to one as to the other
    lone = pair_replacements(Plan(adds=["The user moved to Oslo"], deletes=["a"]), texts)
    assert (lone.updates, lone.adds, lone.deletes) == ([("a", "The user moved to Oslo")], [], [])


async def test_none_adds_nothing(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push('[{"event": "NONE", "id": "0"}]')
    plan = await reconcile(scripted_llm, ["User likes tea"], existing("User likes tea"), model="m")
    assert plan.empty


async def test_safeguard_no_existing_facts_adds_all_without_asking(
    scripted_llm: ScriptedLLM,
) -> None:
    plan = await reconcile(scripted_llm, ["a", "b"], [], model="m")
    assert plan.adds == ["a", "b"]
    assert scripted_llm.calls == []


@pytest.mark.parametrize("failure", [LLMError("timeout"), "this is not json"])
async def test_safeguard_llm_failure_adds_all(
    scripted_llm: ScriptedLLM, failure: str | Exception
) -> None:
    scripted_llm.push(failure)
    plan = await reconcile(scripted_llm, ["a", "b"], existing("c"), model="m")
    assert (plan.adds, plan.updates, plan.deletes) == (["a", "b"], [], [])
    assert plan.reason == "safeguard: LLM failure"


@pytest.mark.parametrize(
    "answer",
    ["[]", '[{"event": "DELETE", "id": "0"}]', '[{"event": "UPDATE", "id": "7", "text": "x"}]'],
)
async def test_safeguard_only_deletes_or_nothing_still_adds(
    scripted_llm: ScriptedLLM, answer: str
) -> None:
    scripted_llm.push(answer)
    plan = await reconcile(
        scripted_llm, ["User lives in Oslo"], existing("User lives in Lyon"), model="m"
    )
    # added, or (the delete was its doing) added as the replacement of the old fact
    assert [*plan.adds, *(text for _, text in plan.updates)] == ["User lives in Oslo"]
    assert plan.updates == ([("real-0", "User lives in Oslo")] if "DELETE" in answer else [])
    assert plan.reason.startswith("safeguard")


def test_none_of_a_deleted_fact_does_not_count_as_kept() -> None:
    plan = plan_from([Decision("DELETE", "", "real-0"), Decision("NONE", "", "real-0")], ["new"])
    assert plan.adds == ["new"]
    assert plan.deletes == ["real-0"]
