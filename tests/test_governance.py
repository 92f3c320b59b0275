"""`memlane.govern` as a library on plain Chat Completions lists."""

from __future__ import annotations

import json

import pytest

from memlane.config import Settings
from memlane.governance import ContextOverflow, GovernedHistory, agovern, govern
from tests.engine.governance.helpers import agentic, noise
from tests.support.text import ScriptedLLM

SETTINGS = Settings(
    governance_context_windows={"small": 8_192},
    governance_safety_margin=512,
    governance_tool_output_limit=300,
    governance_protect_tokens=1_000,
    governance_summary_max_tokens=300,
)


def long_chat(steps: int) -> list[dict[str, object]]:
    return list(agentic("chat", steps).items)


def test_a_short_list_comes_back_as_the_same_dicts() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert govern(messages, model="gpt-4o") == messages


def test_a_long_list_is_summarised_and_stays_valid_chat() -> None:
    llm = ScriptedLLM(default="<state_snapshot>config in config/settings.toml</state_snapshot>")
    history = GovernedHistory(model="small", settings=SETTINGS, llm=llm)
    messages = long_chat(60)
    out = govern(messages, history=history)
    assert len(json.dumps(out)) < len(json.dumps(messages)) / 3
    assert out[0] == messages[0]
    assert out[-2] == messages[-1]
    assert "<memlane_recall>" in str(out[-1]["content"])  # dropped history, recalled last
    assert any("config/settings.toml" in str(m["content"]) for m in out[2:8])
    ids = {c["id"] for m in out for c in m.get("tool_calls") or []}  # type: ignore[union-attr]
    assert {m["tool_call_id"] for m in out if m["role"] == "tool"} <= ids
    assert history.last is not None
    assert history.last.summariser_calls == 1


async def test_the_history_object_keeps_the_prefix_stable_between_calls() -> None:
    history = GovernedHistory(model="small", settings=SETTINGS)  # no LLM: static markers
    messages = long_chat(60)
    first = await agovern(messages, history=history)
    messages.append({"role": "user", "content": "improve module m8 again"})
    second = await agovern(messages, history=history)
    assert "<memlane_recall>" in str(first[-1]["content"])
    assert second[: len(first) - 1] == first[:-1]
    assert second[len(first) - 1] == messages[-1]
    assert "<memlane_recall>" in str(second[-1]["content"])


def test_a_list_that_cannot_fit_raises() -> None:
    history = GovernedHistory(model="small", settings=SETTINGS)
    with pytest.raises(ContextOverflow):
        govern([{"role": "user", "content": noise(60_000, 1)}], history=history)
