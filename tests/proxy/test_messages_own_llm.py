"""memlane's own LLM calls over Anthropic Messages (`llm_provider` anthropic): a user who
only has an Anthropic key (Claude Code) gets fact extraction with that key.

A Claude Code-shaped request (its `x-api-key`, `anthropic-version`, session header)
goes through the proxy; the fact extraction it causes reaches the scripted Anthropic
upstream as a Messages request (the prompt as `system`, the key as the client sent
it), and the fact its answer names is stored. The OpenAI-compatible upstream hears
nothing, and the key is written nowhere under memlane's home.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from memlane.text.llm_anthropic import ANTHROPIC_VERSION
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic, Turn
from tests.support.scripted import RecordedRequest
from tests.support.upstream import RunningProxy, ScriptedUpstream

MODEL = "claude-sonnet-4-6"
CLIENT_KEY = "sk-ant-client-0123456789abcdef"
SERVER_KEY = "sk-ant-server-0123456789abcdef"
OWN_PROMPTS = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)


def own_calls(request: RecordedRequest) -> Turn | None:
    """memlane's own prompts (the prompt is the Messages `system`); the rest is the queue's."""
    system = request.json.get("system") if isinstance(request.json, dict) else None
    user = str(request.json["messages"][-1]["content"]) if system in OWN_PROMPTS else ""
    if system == FACT_PROMPT:
        facts = ["The user's wife is named Anne"] if "Anne" in user else []
        return Turn(text=json.dumps(facts), usage=(30, 9))
    if system == RECONCILE_PROMPT:
        return Turn(text="[]")
    if system == SUMMARY_PROMPT:
        return Turn(text="The user is married to Anne.")
    return None


def claude_code_turn(proxy: RunningProxy, session: str, text: str) -> httpx.Response:
    """One request as Claude Code sends it (its key as `x-api-key`)."""
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    headers = {
        "x-api-key": CLIENT_KEY,
        "anthropic-version": "2023-06-01",
        "x-claude-code-session-id": session,
        "user-agent": "claude-cli/2.1.0 (external, cli)",
        "X-Memlane-Repo": "home",
    }
    return httpx.post(f"{proxy.base}/v1/messages", json=body, headers=headers, timeout=30)


def own_requests(anthropic_upstream: ScriptedAnthropic) -> list[RecordedRequest]:
    return [
        r
        for r in anthropic_upstream.message_requests
        if isinstance(r.json, dict) and r.json.get("system") in OWN_PROMPTS
    ]


def no_file_holds(home: Path, secret: str) -> bool:
    return not any(
        secret.encode() in path.read_bytes() for path in home.rglob("*") if path.is_file()
    )


def test_a_claude_code_request_leads_to_a_fact_extracted_with_its_own_key(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
) -> None:
    proxy = anthropic_proxy(memory_enabled=True, llm_provider="anthropic")
    anthropic_upstream.respond_with(own_calls)
    anthropic_upstream.script(Turn(text="Congratulations!"))
    answer = claude_code_turn(proxy, "cc-own", "I just married Anne!")
    assert answer.status_code == 200, answer.text
    proxy.drain()

    facts = proxy.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]
    extraction = next(
        r for r in own_requests(anthropic_upstream) if r.json["system"] == FACT_PROMPT
    )
    assert extraction.path == "/v1/messages"
    assert extraction.headers["x-api-key"] == CLIENT_KEY  # lent for this request's work
    assert extraction.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert extraction.json["model"] == MODEL  # the request's model, as for the other formats
    assert isinstance(extraction.json["max_tokens"], int)
    assert [m["role"] for m in extraction.json["messages"]] == ["user"]
    assert "I just married Anne!" in extraction.json["messages"][0]["content"]
    assert upstream.requests == []  # the OpenAI-compatible upstream was never asked
    assert no_file_holds(proxy.runtime.settings.home_path, CLIENT_KEY)


def test_the_configured_anthropic_key_is_used_before_the_clients(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy(
        memory_enabled=True, llm_provider="anthropic", anthropic_api_key=SERVER_KEY
    )
    anthropic_upstream.respond_with(own_calls)
    anthropic_upstream.script(Turn(text="Congratulations!"))
    claude_code_turn(proxy, "cc-server-key", "I just married Anne!")
    proxy.drain()

    own = own_requests(anthropic_upstream)
    assert own, "memlane made no call of its own"
    assert {r.headers["x-api-key"] for r in own} == {SERVER_KEY}
    chat = [r for r in anthropic_upstream.message_requests if r not in own]
    assert chat[0].headers["x-api-key"] == CLIENT_KEY  # the client's request went as sent
    assert no_file_holds(proxy.runtime.settings.home_path, SERVER_KEY)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_key_is_lent_only_to_the_api_it_was_sent_to(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
    provider: str,
) -> None:
    """An Anthropic key never goes to the OpenAI-compatible upstream (the default provider):
    memlane's calls there carry no key; with the anthropic provider they carry it."""
    proxy = anthropic_proxy(memory_enabled=True, llm_provider=provider)
    anthropic_upstream.respond_with(own_calls)
    upstream.respond_with(lambda request: None)
    anthropic_upstream.script(Turn(text="Congratulations!"))
    claude_code_turn(proxy, f"cc-{provider}", "I just married Anne!")
    proxy.drain()

    sent: list[Any] = [
        h.get(name)
        for r in (upstream.requests if provider == "openai" else own_requests(anthropic_upstream))
        for h in [r.headers]
        for name in ("authorization", "x-api-key")
    ]
    assert sent, "memlane made no call of its own"
    if provider == "openai":
        assert not any(v and CLIENT_KEY in v for v in sent)
    else:
        assert CLIENT_KEY in sent


def test_a_claude_code_only_user_gets_facts_with_nothing_configured(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    """No `llm_provider`, no key configured, and no OpenAI-compatible upstream to reach:
    memlane's own calls follow the Claude Code request to the Anthropic upstream, with the
    request's model and key."""
    proxy = anthropic_proxy(memory_enabled=True, upstream_url="http://127.0.0.1:9/v1")
    anthropic_upstream.respond_with(own_calls)
    anthropic_upstream.script(Turn(text="Congratulations!"))
    answer = claude_code_turn(proxy, "cc-default", "I just married Anne!")
    assert answer.status_code == 200, answer.text
    proxy.drain()

    facts = proxy.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]
    extraction = next(
        r for r in own_requests(anthropic_upstream) if r.json["system"] == FACT_PROMPT
    )
    assert extraction.headers["x-api-key"] == CLIENT_KEY
    assert extraction.json["model"] == MODEL
    assert no_file_holds(proxy.runtime.settings.home_path, CLIENT_KEY)
