"""The `Memory` library class: the same engine as the proxy, without it."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.memory import AsyncMemory, Memory
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


def test_as_of_takes_a_datetime_and_says_so(settings: Settings) -> None:
    with Memory(settings) as memory, pytest.raises(TypeError, match="as_of takes a datetime"):
        memory.search("tea", as_of="2025-01-01")  # type: ignore[arg-type]
