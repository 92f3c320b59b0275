"""Which session a Messages request belongs to: Claude Code's ids, subagents, the window."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memlane.proxy.identity import claude_user_session, resolve
from tests.proxy.conftest import stored
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic
from tests.support.upstream import RunningProxy

MODEL = "claude-sonnet-4-6"


def post(proxy: RunningProxy, body: dict[str, Any], **headers: str) -> httpx.Response:
    response = httpx.post(
        f"{proxy.base}/v1/messages?beta=true",
        json={"model": MODEL, "max_tokens": 64, **body},
        headers={"x-api-key": "sk-ant-x", "anthropic-version": "2023-06-01", **headers},
    )
    response.raise_for_status()
    return response


def user_id(session: str) -> str:
    return json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (user_id("91f9d807-5fb2-4e7a-ad5d-7887c2335d9f"), "91f9d807-5fb2-4e7a-ad5d-7887c2335d9f"),
        (
            "user_abc123_account_0000-1111_session_5b0f7c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b",
            "5b0f7c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b",
        ),
        ("alice", None),  # a person's id, not a session
        ('{"device_id": "x"}', None),
        ("{not json", None),
        (42, None),
    ],
)
def test_the_session_inside_claude_codes_user_id(value: Any, expected: str | None) -> None:
    assert claude_user_session(value) == expected


def test_the_order_claude_code_ids_take_among_the_others() -> None:
    body = {"metadata": {"user_id": user_id("from-metadata")}, "prompt_cache_key": "pck"}
    claude = {"x-claude-code-session-id": "from-header", "x-session-id": "generic"}
    assert resolve({"x-memlane-session": "explicit", **claude}, body).key == "explicit"
    assert resolve(claude, body).key == "from-header"
    assert resolve({"x-session-id": "generic"}, body).key == "from-metadata"
    assert resolve({}, {"prompt_cache_key": "pck"}).key == "pck"
    anonymous = resolve({"x-api-key": "sk-ant-a", "user-agent": "ua"}, {})
    assert anonymous.key.startswith("anon-")
    assert anonymous.key != resolve({"x-api-key": "sk-ant-b", "user-agent": "ua"}, {}).key
    assert "sk-ant-a" not in anonymous.key


def test_a_conversation_identified_by_metadata_alone_is_one_session(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    metadata = {"user_id": user_id("meta-session")}
    first = [{"role": "user", "content": "one"}]
    post(proxy, {"messages": first, "metadata": metadata})
    second = [
        *first,
        {"role": "assistant", "content": "echo: one"},
        {"role": "user", "content": "two"},
    ]
    post(proxy, {"messages": second, "metadata": metadata})

    assert [s.key for s in proxy.store.list_sessions()] == ["meta-session"]
    assert [r[3] for r in stored(proxy, "meta-session")] == ["one", "echo: one", "two", "echo: two"]
    assert anthropic_upstream.last.json["metadata"] == metadata  # forwarded as sent


def test_subagent_calls_get_a_child_session_linked_to_the_parent(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    main = {"x-claude-code-session-id": "conv-9"}
    post(proxy, {"messages": [{"role": "user", "content": "Refactor the parser."}]}, **main)
    agent = {**main, "x-claude-code-agent-id": "agent-a1"}
    post(proxy, {"messages": [{"role": "user", "content": "Find every call of parse()."}]}, **agent)
    post(
        proxy,
        {
            "messages": [
                {"role": "user", "content": "Find every call of parse()."},
                {"role": "assistant", "content": "echo: Find every call of parse()."},
                {"role": "user", "content": "And in tests?"},
            ]
        },
        **agent,
    )
    nested = {
        **agent,
        "x-claude-code-agent-id": "agent-b2",
        "x-claude-code-parent-agent-id": "agent-a1",
    }
    post(proxy, {"messages": [{"role": "user", "content": "Read tests/a.py."}]}, **nested)

    parent = proxy.store.find_session("conv-9")
    child = proxy.store.find_session("conv-9:agent:agent-a1")
    grandchild = proxy.store.find_session("conv-9:agent:agent-b2")
    assert child.parent_id == parent.id
    assert grandchild.parent_id == child.id
    assert child.metadata.get("subagent") is True
    assert [r[3] for r in stored(proxy, "conv-9")] == [
        "Refactor the parser.",
        "echo: Refactor the parser.",
    ]
    assert [r[3] for r in stored(proxy, "conv-9:agent:agent-a1")] == [
        "Find every call of parse().",
        "echo: Find every call of parse().",
        "And in tests?",
        "echo: And in tests?",
    ]
    assert all(r[4] == "ok" for r in stored(proxy, "conv-9", include_superseded=True))


def test_the_1m_context_beta_governs_against_a_million_tokens(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    long_text = "lorem ipsum dolor sit amet " * 60_000  # ~300k tokens: over 200k, under 1M
    messages = [{"role": "user", "content": long_text}]

    refused = httpx.post(
        f"{proxy.base}/v1/messages",
        json={"model": MODEL, "max_tokens": 64, "messages": messages},
        headers={"x-claude-code-session-id": "small-window"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("prompt is too long")

    beta = "claude-code-20250219,context-1m-2025-08-07"
    response = post(
        proxy,
        {"messages": messages},
        **{"x-claude-code-session-id": "large", "anthropic-beta": beta},
    )
    limit = dict(p.split("=") for p in response.headers["x-memlane-context"].split("; "))["limit"]
    assert int(limit) > 900_000
    assert anthropic_upstream.last.headers["anthropic-beta"] == beta
    assert anthropic_upstream.last.json["model"] == MODEL  # the model name is not touched
