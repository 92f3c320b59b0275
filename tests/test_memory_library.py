"""The `Memory` library class: the same engine as the proxy, without it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

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
