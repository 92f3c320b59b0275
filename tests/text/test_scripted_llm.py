"""The shared `ScriptedLLM` fixture behaves as its docstring promises (others rely on it)."""

from __future__ import annotations

import pytest

from memlane.text.llm import LLM, Completion, LLMError
from tests.support.text import ScriptedLLM


async def test_answers_in_order_and_records_calls(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push("first", Completion("second", "m2", 5, 1))
    llm: LLM = scripted_llm
    one = await llm.complete([{"role": "user", "content": "q1"}], model="m1", json_mode=True)
    two = await llm.complete(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "q2"}]
    )
    assert (one.text, one.model) == ("first", "m1")
    assert two == Completion("second", "m2", 5, 1)
    assert scripted_llm.prompts == ["q1", "q2"]
    assert scripted_llm.calls[0].json_mode is True
    assert scripted_llm.calls[0].model == "m1"
    assert scripted_llm.calls[1].model is None


async def test_raises_queued_exceptions(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(LLMError("down"), "after")
    with pytest.raises(LLMError, match="down"):
        await scripted_llm.complete([{"role": "user", "content": "q"}])
    assert (await scripted_llm.complete([{"role": "user", "content": "q"}])).text == "after"


async def test_empty_queue_fails_loudly_unless_a_default_is_set(scripted_llm: ScriptedLLM) -> None:
    with pytest.raises(LLMError, match="no answer queued"):
        await scripted_llm.complete([{"role": "user", "content": "q"}])
    fallback = ScriptedLLM(default="{}")
    assert (await fallback.complete([{"role": "user", "content": "q"}])).text == "{}"
    assert (await fallback.complete([{"role": "user", "content": "q"}])).text == "{}"
    assert len(fallback.calls) == 2
