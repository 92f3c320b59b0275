"""Long-term memory and `@@` references for Anthropic Messages clients, as for the others."""

from __future__ import annotations

from typing import Any

import anthropic

from memlane.engine.fence import FENCE_CLOSE, FENCE_OPEN
from tests.proxy.test_messages_own_llm import own_calls
from tests.proxy.test_messages_own_llm import own_requests as own
from tests.support.anthropic_upstream import ScriptedAnthropic, Turn, anthropic_sdk
from tests.support.upstream import ProxyFactory, ScriptedUpstream

MODEL = "claude-sonnet-4-6"


def claude(proxy: Any, session: str) -> anthropic.Anthropic:
    return anthropic_sdk(proxy, **{"X-Claude-Code-Session-Id": session, "X-Memlane-Repo": "home"})


def test_a_fact_from_one_claude_session_is_recalled_in_the_next(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = proxy_factory(anthropic_upstream_url=anthropic_upstream.base, index_enabled=False)
    # memlane's own calls (fact extraction and the rest) go where Claude's requests go
    anthropic_upstream.respond_with(own_calls)
    anthropic_upstream.script(Turn(text="Congratulations!"), Turn(text="Anne."))
    claude(proxy, "cc-a").messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "I just married Anne!"}]
    )
    proxy.drain()
    facts = proxy.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]

    question = [
        {"type": "text", "text": "<system-reminder>\nToday is Tuesday.\n</system-reminder>"},
        {"type": "text", "text": "What is my wife's name?", "cache_control": {"type": "ephemeral"}},
    ]
    claude(proxy, "cc-b").messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": question}]
    )
    client = [r for r in anthropic_upstream.message_requests if r not in own(anthropic_upstream)]
    sent = client[-1].json["messages"]
    assert len(sent) == 1
    blocks = sent[0]["content"]
    # the recalled block sits in the user's turn just before the question, which stays last
    assert blocks[0] == question[0]
    assert blocks[-1] == question[1]
    assert blocks[1]["text"].startswith(FENCE_OPEN)
    assert blocks[1]["text"].endswith(FENCE_CLOSE)
    assert "[memory] The user's wife is named Anne" in blocks[1]["text"]


def test_an_unresolvable_reference_is_answered_in_anthropics_shape(
    proxy_factory: ProxyFactory, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = proxy_factory(
        anthropic_upstream_url=anthropic_upstream.base, memory_enabled=False, index_enabled=False
    )
    sdk = claude(proxy, "cc-ref")
    messages = [{"role": "user", "content": "Do it like @@no-such-session"}]
    answer = sdk.messages.create(model=MODEL, max_tokens=50, messages=messages)
    assert "memlane could not resolve @@no-such-session" in answer.content[0].text
    with sdk.messages.stream(model=MODEL, max_tokens=50, messages=messages) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].text == answer.content[0].text
    assert anthropic_upstream.message_requests == []
