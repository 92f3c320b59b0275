"""Server-side history for Anthropic Messages clients (the `anthropic` SDK): each request
carries only its new message, and the upstream still sees the conversation."""

from __future__ import annotations

import json

from tests.proxy.test_server_history import SUMMARY, summariser
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic, anthropic_sdk
from tests.support.upstream import ScriptedUpstream

MODEL = "claude-sonnet-4-6"


def test_a_messages_client_sends_one_message_and_the_upstream_gets_the_working_context(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
) -> None:
    # memlane's own summariser pinned to the OpenAI-compatible upstream, which scripts it
    proxy = anthropic_proxy(**SUMMARY, llm_provider="openai")
    upstream.respond_with(summariser(fails=False))  # type: ignore[arg-type]
    client = anthropic_sdk(proxy, **{"X-Memlane-Session": "claude", "X-Memlane-History": "server"})
    for i in range(8):
        client.messages.create(
            model=MODEL,
            max_tokens=50,
            system="Be brief.",
            messages=[{"role": "user", "content": f"turn {i}"}],
        )
        proxy.drain()

    sent = anthropic_upstream.message_requests
    assert len(sent) == 8
    assert [m["content"] for m in sent[0].json["messages"]] == ["turn 0"]
    third = [_text(m["content"]) for m in sent[2].json["messages"]]
    assert third == ["turn 0", "echo: turn 0", "turn 1", "echo: turn 1", "turn 2"]
    assert all(
        r.json["system"] == "Be brief." or "Be brief." in json.dumps(r.json["system"]) for r in sent
    )

    session = proxy.store.find_session("claude")
    assert session is not None
    assert session.summarized_count == 16 - 2  # folded after the last answer, keep-last 2
    last = sent[-1].json
    assert last["system"] == "Be brief."  # the client's own system prompt, as sent
    # Messages has no system turn mid-conversation: the summary opens the first user turn
    first, *rest = last["messages"]
    assert first["role"] == "user"
    summary, six = first["content"]
    assert summary["text"].startswith("Summary of the earlier conversation (12 messages)")
    assert "SUMMARY covering" in summary["text"]
    assert six["text"] == "turn 6"
    assert [(m["role"], _text(m["content"])) for m in rest] == [
        ("assistant", "echo: turn 6"),
        ("user", "turn 7"),
    ]
    stored = [m.message.text for m in proxy.store.list_messages(session.id)]
    assert stored.count("turn 3") == 1  # each new message stored once


def _text(content: object) -> str:
    """A message's text, whether it is a string or a list of blocks."""
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))
