"""Recalled history goes before the user's question, in each wire format, never after it.

A long conversation is trimmed to a small window; the snippet of dropped history that
answers the question is recalled. At the scripted upstream, the question is the last
thing the user says and the recall block comes right before it (a model answers what it
reads last: the user, not memlane's excerpts).
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.proxy.conftest import QUIET
from tests.proxy.test_governance import summaries, words
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic, Turn
from tests.support.upstream import ProxyFactory, Reply, ScriptedUpstream

MODEL = "tiny-model"
WINDOW = {
    **QUIET,
    "governance_clients": "all",
    "governance_context_windows": {MODEL: 4_096},
    "governance_safety_margin": 256,
    "governance_protect_tokens": 600,
    "governance_summary_max_tokens": 200,
    "governance_recall_chars": 800,
}
FACT = "Decision: the deploy target is blue-kestrel-7, not the old staging host."
QUESTION = "Which deploy target did we decide on?"


def conversation() -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = [("user", "Let us plan the release."), ("assistant", "Sure.")]
    for step in range(24):
        turns += [("user", f"Step {step}: {words(160, step)}"), ("assistant", f"Done {step}.")]
        if step == 3:
            turns += [("user", FACT), ("assistant", "Noted: blue-kestrel-7.")]
    return [*turns, ("user", QUESTION)]


def texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [str(part.get("text", "")) for part in content]


def assert_recall_then_question(said: list[str]) -> None:
    assert said[-1] == QUESTION
    assert "<memlane_recall>" in said[-2]
    assert "blue-kestrel-7" in said[-2]
    assert not [t for t in said[:-2] if "<memlane_recall>" in t]


def test_chat_completions(proxy_factory: ProxyFactory, upstream: ScriptedUpstream) -> None:
    proxy = proxy_factory(**WINDOW)
    upstream.respond_with(summaries)
    upstream.script(Reply(text="blue-kestrel-7"))
    messages = [{"role": role, "content": text} for role, text in conversation()]
    body = {"model": MODEL, "messages": messages}
    sent = httpx.post(f"{proxy.url}/chat/completions", json=body, timeout=60)
    assert sent.status_code == 200, sent.text
    forwarded = upstream.model_requests[-1].json["messages"]
    assert len(forwarded) < len(messages)
    assert forwarded[-1] == messages[-1]  # the question as sent, last
    assert_recall_then_question([t for m in forwarded for t in texts(m["content"])])


def test_responses(proxy_factory: ProxyFactory, upstream: ScriptedUpstream) -> None:
    proxy = proxy_factory(**WINDOW)
    upstream.respond_with(summaries)
    upstream.script(Reply(text="blue-kestrel-7"))
    items = [{"type": "message", "role": role, "content": text} for role, text in conversation()]
    body = {"model": MODEL, "input": items}
    sent = httpx.post(f"{proxy.url}/responses", json=body, timeout=60)
    assert sent.status_code == 200, sent.text
    forwarded = upstream.model_requests[-1].json["input"]
    assert len(forwarded) < len(items)
    assert forwarded[-1] == items[-1]
    assert_recall_then_question([t for i in forwarded for t in texts(i["content"])])


def test_anthropic_messages(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
) -> None:
    proxy = anthropic_proxy(**WINDOW)
    upstream.respond_with(summaries)  # memlane's own summariser call
    anthropic_upstream.script(Turn(text="blue-kestrel-7"))
    messages = [{"role": role, "content": text} for role, text in conversation()]
    body = {"model": MODEL, "max_tokens": 50, "messages": messages}
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    sent = httpx.post(f"{proxy.base}/v1/messages", json=body, headers=headers, timeout=60)
    assert sent.status_code == 200, sent.text
    forwarded = anthropic_upstream.last.json["messages"]
    assert len(forwarded) < len(messages)
    assert forwarded[-1]["role"] == "user"
    assert_recall_then_question([t for m in forwarded for t in texts(m["content"])])
