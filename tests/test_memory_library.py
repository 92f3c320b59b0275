"""The `Memory` library class: the same engine as the proxy, without it."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.memory import AsyncMemory, Memory
from memlane.text.llm import LLMError
from tests.support.text import ScriptedLLM


def test_sync_memory_add_search_augment_forget(settings: Settings) -> None:
    with Memory(settings) as memory:
        kept = memory.add("The user's cat is called Miso", scope="ns:home")
        memory.add("The office wifi password rotates monthly", scope="ns:work")
        hits = memory.search("what is my cat called", scopes=["ns:home", "global"])
        assert [h.id for h in hits] == [kept]
        assert hits[0].role == "memory"

        chat = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name my cat?"},
        ]
        out = memory.augment(chat, namespace="home")
        assert out[0] == chat[0]
        assert out[-1] == chat[-1]
        assert "[memory] The user's cat is called Miso" in out[1]["content"]
        assert "wifi" not in out[1]["content"]  # another namespace
        assert memory.forget(kept)
        assert memory.search("cat", scopes=["ns:home"]) == []
        assert memory.augment(chat, namespace="home") == chat


async def test_async_memory_runs_the_write_path(settings: Settings, tmp_path: Path) -> None:
    llm = ScriptedLLM([json.dumps(["The user is allergic to peanuts"]), "Allergic to peanuts."])
    memory = AsyncMemory(settings, llm=llm)
    try:
        report = await memory.remember(
            "I'm allergic to peanuts", "Noted.", conversation="c1", namespace="me", model="m"
        )
        assert report.facts_added == ["The user is allergic to peanuts"]
        hits = await memory.search("peanut allergy", scopes=["ns:me"])
        assert hits[0].text == "The user is allergic to peanuts"
        facts = list((tmp_path / "memory" / "entries").rglob("facts/*.md"))
        assert len(facts) == 1
    finally:
        await memory.close()


def test_add_of_an_exact_repeat_returns_the_existing_id(settings: Settings) -> None:
    with Memory(settings) as memory:
        ids = {memory.add("The user's cat is called Miso") for _ in range(3)}
        assert len(ids) == 1
        assert len(memory.search("cat Miso")) == 1
        memory.forget(ids.pop())
        assert memory.add("The user's cat is called Miso")  # a forgotten one is added anew
        assert len(memory.search("cat Miso")) == 1


def test_memories_over_time(settings: Settings) -> None:
    jan, feb, mar = (datetime(2026, m, 1, tzinfo=UTC) for m in (1, 2, 3))
    with Memory(settings) as memory:
        first = memory.add("The user's team is Payments", scope="ns:work", valid_from=jan)
        second = memory.supersede(first, "The user's team is Search", at=mar)
        hits = memory.search("which team", scopes=["ns:work"])
        assert [(h.id, h.valid_from, h.valid_to) for h in hits] == [(second, mar, None)]
        before = memory.search("which team", scopes=["ns:work"], as_of=feb)
        assert [(h.id, h.valid_to) for h in before] == [(first, mar)]
        history = memory.history(second[:8])
        assert [(v.id, v.valid_from, v.valid_to) for v in history] == [
            (first, jan, mar),
            (second, mar, None),
        ]
        assert (history[0].replaced_by, history[1].supersedes) == (second, first)


async def test_async_memory_is_an_async_context_manager(settings: Settings) -> None:
    async with AsyncMemory(settings) as memory:
        kept = await memory.add("The user's dog is called Pixel", scope="ns:home")
    async with AsyncMemory(settings) as memory:  # closed cleanly: the next one reads it
        assert [h.id for h in await memory.search("dog Pixel")] == [kept]


def test_search_defaults_to_every_scope_as_the_cli_does(settings: Settings) -> None:
    with Memory(settings) as memory:
        in_repo = memory.add("Deploys go to the staging cluster first", scope="ns:api")
        everywhere = memory.add("The user prefers staging names in lower case")
        found = {h.id for h in memory.search("staging")}
        assert found == {in_repo, everywhere}
        assert [h.id for h in memory.search("staging", scopes=["global"])] == [everywhere]


def test_a_repeat_with_an_earlier_start_records_it(settings: Settings) -> None:
    spring = datetime(2026, 3, 1, tzinfo=UTC)
    with Memory(settings) as memory:
        first = memory.add("The user lives in Lisbon")
        again = memory.add("The user lives in Lisbon", valid_from=spring)
        assert again == first
        assert memory.history(first)[0].valid_from == spring
        assert [h.id for h in memory.search("Lisbon", as_of=datetime(2026, 4, 1, tzinfo=UTC))] == [
            first
        ]
        later = memory.supersede(
            first, "The user lives in Porto", at=datetime(2026, 6, 1, tzinfo=UTC)
        )
        assert memory.history(later)[-1].text == "The user lives in Porto"


def test_a_repeat_with_a_later_start_says_why_not(settings: Settings) -> None:
    with Memory(settings) as memory:
        memory.add("The user lives in Lisbon", valid_from=datetime(2026, 3, 1, tzinfo=UTC))
        with pytest.raises(ValueError, match="already says this, true since 2026-03-01"):
            memory.add("The user lives in Lisbon", valid_from=datetime(2026, 5, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    "method", ["add", "supersede", "history", "remember", "search", "augment", "forget"]
)
def test_the_sync_face_takes_the_async_parameters_by_name(method: str) -> None:
    def named(cls: type) -> list[tuple[str, object, object]]:
        signature = inspect.signature(getattr(cls, method))
        return [(p.name, p.kind, p.default) for p in signature.parameters.values()]

    assert named(Memory) == named(AsyncMemory)  # IDEs show the same names, nothing hides


def test_the_fact_ranks_above_the_turns_that_echo_it(settings: Settings) -> None:
    llm = ScriptedLLM([json.dumps([{"message": 1, "fact": "The user prefers tabs"}])])
    with Memory(settings, llm=llm) as memory:
        memory.remember("I prefer tabs.", "ack 1: I prefer tabs.", conversation="c1", model="m")
        hits = memory.search("prefers tabs")
        assert [h.text for h in hits[:3]] == [
            "The user prefers tabs",
            "I prefer tabs.",
            "ack 1: I prefer tabs.",
        ]
        assert hits[0].score >= hits[1].score


def test_the_same_text_in_two_scopes_comes_once_per_scope(settings: Settings) -> None:
    with Memory(settings) as memory:
        mine = memory.add("The user prefers tabs")
        repo = memory.add("The user prefers tabs", scope="ns:api")
        hits = memory.search("prefers tabs")
        assert {(h.id, h.scope) for h in hits} == {(mine, "global"), (repo, "ns:api")}


def test_search_returns_as_many_as_top_k_asks_for(settings: Settings) -> None:
    fruits = ["apples", "pears", "plums", "figs", "kiwis", "limes", "dates", "cherries"]
    with Memory(settings) as memory:
        for n, fruit in enumerate(fruits):
            memory.add(f"The user bought mangos and {fruit} on day {n}", scope="ns:shop")
        assert settings.memory_top_k < len(fruits)
        default = memory.search("mangos", scopes=["ns:shop"])
        assert len(default) == settings.memory_top_k
        assert len(memory.search("mangos", scopes=["ns:shop"], top_k=7)) == 7
        assert len(memory.search("mangos", scopes=["ns:shop"], top_k=2)) == 2
        with pytest.raises(ValueError, match="top_k must be 1 or more"):
            memory.search("mangos", scopes=["ns:shop"], top_k=0)


def test_a_memory_with_a_nul_in_it_is_kept_and_committed(settings: Settings) -> None:
    """A commit message quotes the memory: a NUL in it cannot be a command's argument."""
    with Memory(settings) as memory:
        kept = memory.add("The serial port sends nul\x00bytes at boot", scope="ns:lab")
        assert [h.id for h in memory.search("serial port", scopes=["ns:lab"])] == [kept]
    log = subprocess.run(
        ["git", "log", "--format=%B"],
        cwd=settings.memory_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "serial port sends nul\ufffdbytes" in log


def test_mistakes_in_a_call_are_clear_errors_and_close_may_come_twice(settings: Settings) -> None:
    with Memory(settings) as memory:
        with pytest.raises(ValueError, match="role must be one of memory, user"):
            memory.add("The user likes tea", role="bogus")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="text must be a string, not int"):
            memory.add(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"scopes=\['ns:lab'\]"):
            memory.search("tea", scopes="ns:lab")
        assert memory.search("tea") == []  # nothing was added by the bad calls
        memory.close()  # and the `with` closes it once more: nothing happens


async def test_the_sync_face_inside_an_event_loop_points_to_the_async_one(
    settings: Settings,
) -> None:
    memory = Memory(settings)
    try:
        with pytest.raises(RuntimeError, match="use AsyncMemory there"):
            memory.search("tea")
    finally:
        await asyncio.to_thread(memory.close)  # where no loop runs, it closes as usual


def test_times_are_taken_as_iso_8601_strings_as_the_cli_reads_them(settings: Settings) -> None:
    jan, mar = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)
    with Memory(settings) as memory:
        first = memory.add("The user's team is Payments", scope="ns:work", valid_from="2026-01-01")
        second = memory.supersede(first, "The user's team is Search", at="2026-03-01T00:00Z")
        assert [(v.valid_from, v.valid_to) for v in memory.history(second)] == [
            (jan, mar),
            (mar, None),
        ]
        for then in ("2026-02-01", "2026-02-01T09:30", "2026-02-01T09:30+01:00", date(2026, 2, 1)):
            found = memory.search("which team", scopes=["ns:work"], as_of=then)
            assert [h.id for h in found] == [first], then
        assert [h.id for h in memory.search("team", scopes=["ns:work"], as_of="now")] == [second]
        with pytest.raises(ValueError, match=r"as_of 'soon' is not a date: use YYYY-MM-DD"):
            memory.search("tea", as_of="soon")
        with pytest.raises(ValueError, match=r"valid_from '2026-13-01' is not a date: use"):
            memory.add("The user likes tea", valid_from="2026-13-01")
        with pytest.raises(TypeError, match="as_of takes a datetime, a date or a string"):
            memory.search("tea", as_of=20260101)  # type: ignore[arg-type]
        assert memory.search("tea") == []  # nothing was added by the bad calls


@pytest.mark.parametrize(
    ("update", "user", "answers", "said"),
    [
        ({"memory_extract_facts": False}, "I moved to Oslo", [], "fact extraction is off"),
        ({}, "", [], "no user message to learn facts from"),
        ({}, "I moved to Oslo", [LLMError("no model: set llm_model")], "no model: set llm_model"),
        ({}, "I moved to Oslo", [LLMError("bad key", status=401)], "set MEMLANE_LLM_API_KEY"),
        ({}, "I moved to Oslo", ["nope", "still nope", "no"], "gave up: 3 answers of model m"),
        ({}, "I moved to Oslo", ["[]"], "the model found no durable fact"),
    ],
)
async def test_remember_says_why_it_learned_no_fact(
    settings: Settings, update: dict[str, Any], user: str, answers: list[Any], said: str
) -> None:
    llm = ScriptedLLM(answers)
    async with AsyncMemory(settings.model_copy(update=update), llm=llm) as memory:
        report = await memory.remember(user, "Noted.", conversation="c1", model="m")
    assert report.facts_added == []
    assert report.turns == (2 if user else 1)  # what was said is kept all the same
    assert said in report.reason


def test_remember_without_a_model_for_extraction_says_to_set_one(settings: Settings) -> None:
    """No LLM configured: the real client refuses before any request, and the report says
    what to set."""
    with Memory(settings) as memory:
        report = memory.remember("I moved to Oslo", "Noted.", conversation="c1")
    assert report.facts_added == []
    assert "no model: set llm_model" in report.reason
