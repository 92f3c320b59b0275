"""memlane's own LLM calls over Anthropic Messages, against the scripted Anthropic upstream."""

from __future__ import annotations

import pytest

from memlane.text.llm import REQUEST_KEY, LentKey, LLMError
from memlane.text.llm_anthropic import AnthropicLLM, parse_message, split_system
from tests.support.anthropic_upstream import ScriptedAnthropic, Turn
from tests.support.scripted import Fail

KEY = "sk-ant-own-0123456789"


async def test_a_completion_is_the_text_blocks_with_the_prompt_as_system(
    anthropic_upstream: ScriptedAnthropic,
) -> None:
    anthropic_upstream.script(Turn(reasoning="hm", text='["a fact"]', usage=(5, 3), cache_read=7))
    llm = AnthropicLLM(anthropic_upstream.base, api_key=KEY, default_model="claude-haiku-4-5")
    messages = [
        {"role": "system", "content": "Extract facts."},
        {"role": "user", "content": "I like tea."},
    ]
    done = await llm.complete(messages, max_tokens=100, json_mode=True)

    assert done.text == '["a fact"]'  # the thinking block is not the answer
    assert (done.prompt_tokens, done.completion_tokens) == (5 + 7, 3)
    sent = anthropic_upstream.last
    assert sent.json == {
        "model": "claude-haiku-4-5",
        "messages": [{"role": "user", "content": "I like tea."}],
        "max_tokens": 100,
        "temperature": 0.0,
        "system": "Extract facts.",
    }
    assert sent.headers["x-api-key"] == KEY
    assert "authorization" not in sent.headers


async def test_a_lent_key_is_borrowed_only_when_it_was_sent_to_anthropic(
    anthropic_upstream: ScriptedAnthropic,
) -> None:
    llm = AnthropicLLM(anthropic_upstream.base, default_model="m", borrow_request_key=True)
    for lent, expected in (
        (LentKey("anthropic", {"x-api-key": "sk-ant-lent"}), "sk-ant-lent"),
        (LentKey("openai", {"authorization": "Bearer sk-openai"}), None),
        (None, None),
    ):
        token = REQUEST_KEY.set(lent)
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            REQUEST_KEY.reset(token)
        assert anthropic_upstream.last.headers.get("x-api-key") == expected
        assert "authorization" not in anthropic_upstream.last.headers
    assert "sk-ant-lent" not in repr(LentKey("anthropic", {"x-api-key": "sk-ant-lent"}))


async def test_a_refusal_is_an_llm_error_with_the_key_masked(
    anthropic_upstream: ScriptedAnthropic,
) -> None:
    anthropic_upstream.script(Fail(401, f"invalid x-api-key {KEY}", "authentication_error"))
    llm = AnthropicLLM(anthropic_upstream.base, api_key=KEY, default_model="m")
    with pytest.raises(LLMError) as failed:
        await llm.complete([{"role": "user", "content": "hi"}])
    assert failed.value.refused
    assert "invalid x-api-key ***" in str(failed.value)
    assert KEY not in str(failed.value)


def test_parse_message_accepts_text_blocks_and_rejects_what_is_no_message() -> None:
    body = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert parse_message(body, "m").text == "ab"
    assert parse_message({"content": [], "usage": {"input_tokens": True}}, "m").prompt_tokens == 0
    for bad in ({"type": "error"}, {"content": "text"}, [], None):
        with pytest.raises(LLMError):
            parse_message(bad, "m")


def test_split_system_takes_system_and_developer_out_in_order() -> None:
    system, turns = split_system(
        [
            {"role": "system", "content": "One."},
            {"role": "developer", "content": "Two."},
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A"},
        ]
    )
    assert system == "One.\n\nTwo."
    assert turns == [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
