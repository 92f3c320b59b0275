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
    assert "<memlane_recall>" in str(first[-1]["content"])  # a tool loop: after its results
    assert second[: len(first) - 1] == first[:-1]
    assert second[-1] == messages[-1]  # a fresh question stays last, the recall before it
    assert "<memlane_recall>" in str(second[-2]["content"])


def test_a_list_that_cannot_fit_raises() -> None:
    history = GovernedHistory(model="small", settings=SETTINGS)
    with pytest.raises(ContextOverflow):
        govern([{"role": "user", "content": noise(60_000, 1)}], history=history)


def small_window_session(steps: int = 60) -> list[dict[str, object]]:
    """An agentic session far over an 8k window: tool calls with ~800-word results."""
    words = " ".join(f"w{i % 97}" for i in range(800))
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Remember: the deploy key lives at secret/ops/deploy."},
        {"role": "assistant", "content": "Noted."},
    ]
    for i in range(steps):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"cmd": f"step {i}"})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i}: {words}"},
            {"role": "user", "content": f"step {i} done, continue with step {i + 1}"},
            {"role": "assistant", "content": f"continuing step {i + 1}"},
        ]
    messages.append({"role": "user", "content": "What should you do next?"})
    return messages


def test_a_small_window_keeps_the_newest_turns_not_just_the_question() -> None:
    from memlane.engine.governance.budget import Budget, Window

    history = GovernedHistory(model="gpt-4")  # 8,192 tokens
    messages = small_window_session()
    out = govern(messages, history=history)
    stats = history.last
    assert stats is not None
    budget = Budget.of(Settings(), Window(8192, "table"))
    assert stats.tokens_out <= budget.target
    texts = [m.get("content") for m in out]
    # the newest text turns that fit are all there, in order, ending with the question
    assert texts[-3:] == [
        "step 59 done, continue with step 60",
        "continuing step 60",
        "What should you do next?",
    ]
    assert "step 58 done, continue with step 59" in texts
    # and the tail budget is used, not left empty: more than the head and the question
    assert stats.tokens_out > budget.target // 2
    # every tool result kept has its call (pairs intact)
    calls = {c["id"] for m in out for c in m.get("tool_calls") or []}  # type: ignore[attr-defined]
    results = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    assert results <= calls
