"""Anthropic Messages through memlane, with the official `anthropic` SDK as the client.

The scripted Anthropic-compatible upstream answers; what went upstream, what the client
got and what was stored are checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from memlane.engine.turn_store import EVENT_CACHE_USAGE
from tests.proxy.conftest import stored
from tests.support.anthropic_upstream import (
    AnthropicProxy,
    ContextLengthExceeded,
    ScriptedAnthropic,
    Turn,
    anthropic_sdk,
    frames,
    signature,
)
from tests.support.upstream import Fail, Raw, RunningProxy, ScriptedUpstream, ToolCallSpec

MODEL = "claude-sonnet-4-6"
KEY = "sk-ant-client-secret-0123456789"


def client(proxy: RunningProxy, session: str = "conv-1", **headers: str) -> anthropic.Anthropic:
    return anthropic_sdk(proxy, KEY, **{"X-Claude-Code-Session-Id": session, **headers})


def blocks_of(message: Any) -> list[dict[str, Any]]:
    """An SDK answer's content as request blocks (what a client sends back)."""
    return [b.model_dump(exclude_none=True) for b in message.content]


def test_a_plain_message_is_forwarded_as_sent_and_stored(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
) -> None:
    proxy = anthropic_proxy()
    anthropic_upstream.script(Turn(text="Paris.", usage=(20, 3)))
    extra = {"anthropic-beta": "some-beta-2025-01-01", "anthropic-version": "2023-06-01"}
    sdk = client(proxy, **extra, **{"X-Memlane-Repo": "geo"})

    answer = sdk.messages.create(
        model=MODEL,
        max_tokens=64,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "Capital of France?"}],
    )

    assert [b.text for b in answer.content if b.type == "text"] == ["Paris."]
    sent = anthropic_upstream.last
    assert sent.path == "/v1/messages"
    assert sent.json["system"][0]["cache_control"] == {"type": "ephemeral"}
    headers = sent.headers
    assert headers["authorization"] == f"Bearer {KEY}"  # this SDK sends its key as a Bearer
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "some-beta-2025-01-01"
    assert headers["x-claude-code-session-id"] == "conv-1"
    assert headers["x-stainless-lang"] == "python"
    assert not [name for name in headers if name.startswith("x-memlane-")]
    assert upstream.requests == []  # nothing went to the OpenAI-compatible upstream
    assert stored(proxy, "conv-1") == [
        ("user", "message", "client", "Capital of France?", "ok"),
        ("assistant", "message", "client", "Paris.", "ok"),
    ]
    session = proxy.store.find_session("conv-1")
    assert session.namespace == "geo"
    assert (session.prompt_tokens, session.completion_tokens) == (20, 3)


def test_a_streamed_message_reaches_the_client_and_is_stored(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    anthropic_upstream.script(
        Turn(text="A long streamed answer, piece by piece.", cache_read=900, cache_creation=100)
    )
    with client(proxy).messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Stream please"}]
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()

    assert "".join(pieces) == "A long streamed answer, piece by piece."
    assert len(pieces) > 3  # relayed as the upstream's deltas, not one block
    assert final.usage.cache_read_input_tokens == 900
    assert anthropic_upstream.last.json["stream"] is True
    assert stored(proxy, "conv-1")[-1] == (
        "assistant",
        "message",
        "client",
        "A long streamed answer, piece by piece.",
        "ok",
    )
    session = proxy.store.find_session("conv-1")
    assert session.prompt_tokens == 11 + 900 + 100  # input + cache read + cache creation
    events = proxy.store.list_events(session.id, kind=EVENT_CACHE_USAGE)
    assert [e.payload for e in events] == [{"read": 900, "created": 100}]


def test_the_stream_is_relayed_byte_for_byte_unknown_and_malformed_events_included(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    sent = frames(
        [
            ("message_start", {"message": {"id": "msg_x", "usage": {"input_tokens": 5}}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
            ("future_event_kind", {"whatever": [1, 2, 3]}),
            ("content_block_delta", {"index": 0, "delta": {"type": "new_delta", "x": 1}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "lo"}}),
            ("content_block_stop", {"index": 0}),
            (
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
        ]
    )
    sent.insert(3, "event: ping\ndata: {not json at all\n\n")
    sent.insert(4, ": a comment line\n\n")
    sent.append('event: message_stop\ndata: {"type":"message_stop"}\n\n')
    anthropic_upstream.script(Raw(frames=tuple(sent)))
    body = {
        "model": MODEL,
        "max_tokens": 9,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.stream(
        "POST",
        f"{proxy.base}/v1/messages",
        json=body,
        headers={
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
            "x-claude-code-session-id": "raw",
        },
    ) as response:
        received = b"".join(response.iter_raw())

    assert received == "".join(sent).encode()
    assert stored(proxy, "raw")[-1] == ("assistant", "message", "client", "Hello", "ok")


def test_a_tool_round_trip_keeps_each_tool_use_with_its_result(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    call = ToolCallSpec("get_weather", json.dumps({"city": "Oslo", "unit": "C"}), "toolu_01")
    anthropic_upstream.script(
        Turn(text="Let me check.", tool_calls=[call], chunk_size=3), Turn(text="It is 4 C in Oslo.")
    )
    sdk = client(proxy)
    tools = [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    with sdk.messages.stream(model=MODEL, max_tokens=99, tools=tools, messages=history) as stream:
        first = stream.get_final_message()
    tool_use = next(b for b in first.content if b.type == "tool_use")
    assert tool_use.input == {"city": "Oslo", "unit": "C"}
    history += [
        {"role": "assistant", "content": blocks_of(first)},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use.id, "content": "4 C, cloudy"},
                {"type": "text", "text": "Answer briefly."},
            ],
        },
    ]
    second = sdk.messages.create(model=MODEL, max_tokens=99, tools=tools, messages=history)

    assert second.content[0].text == "It is 4 C in Oslo."
    forwarded = anthropic_upstream.last.json["messages"]
    assert forwarded == history  # nothing memlane added: the history as the client sent it
    rows = stored(proxy, "conv-1")
    assert rows == [
        ("user", "message", "client", "Weather in Oslo?", "ok"),
        ("assistant", "message", "client", "Let me check.", "ok"),
        ("assistant", "tool_call", "client", "", "ok"),
        ("tool", "tool_result", "client", "4 C, cloudy", "ok"),
        ("user", "message", "client", "Answer briefly.", "ok"),
        ("assistant", "message", "client", "It is 4 C in Oslo.", "ok"),
    ]
    session = proxy.store.find_session("conv-1")
    call_row = proxy.store.list_messages(session.id)[2].message
    assert [(c.id, c.name, json.loads(c.arguments)) for c in call_row.tool_calls] == [
        ("toolu_01", "get_weather", {"city": "Oslo", "unit": "C"})
    ]
    assert call_row.continues  # the tool_use is part of the text's assistant turn


def test_thinking_blocks_go_back_upstream_byte_exact_with_their_signatures(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    call = ToolCallSpec("Bash", json.dumps({"command": "ls"}), "toolu_think")
    anthropic_upstream.script(
        Turn(reasoning="I should list the files first.", redacted="ENCRYPTED==", tool_calls=[call]),
        Turn(text="Two files."),
    )
    # a TODO makes memlane add its state block, so the request is re-rendered, not relayed as is
    sdk = client(proxy, **{"X-Memlane-Todo": "list the files"})
    thinking = {"type": "enabled", "budget_tokens": 2000}
    history: list[dict[str, Any]] = [{"role": "user", "content": "What is here?"}]
    with sdk.messages.stream(
        model=MODEL, max_tokens=4000, thinking=thinking, messages=history
    ) as s:
        first = s.get_final_message()
    returned = blocks_of(first)
    assert [b["type"] for b in returned] == ["redacted_thinking", "thinking", "tool_use"]
    assert returned[1]["signature"] == signature("I should list the files first.")
    history += [
        {"role": "assistant", "content": returned},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_think", "content": "a b"}],
        },
    ]
    sdk.messages.create(
        model=MODEL,
        max_tokens=4000,
        thinking=thinking,
        messages=history,
        extra_headers={"X-Memlane-Todo": "report the files"},
    )

    before, sent = anthropic_upstream.message_requests
    # the first turn's block stays where it was sent: the prefix is stable
    assert sent.json["messages"][0] == before.json["messages"][0]
    assert [b["type"] for b in before.json["messages"][0]["content"]] == ["text", "text"]
    assistant = sent.json["messages"][1]
    assert assistant == {"role": "assistant", "content": returned}
    # byte-exact: the client's serialisation of the turn is inside what went upstream
    assert json.dumps(returned, separators=(",", ":")).encode() in sent.body
    # memlane's block comes after the tool result, in the same user turn
    last = sent.json["messages"][-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
    assert "<todo>\nreport the files\n</todo>" in last["content"][1]["text"]
    rows = stored(proxy, "conv-1")
    assert rows[1][:3] == ("system", "message", "state")
    assert [r[:2] for r in rows[2:5]] == [
        ("assistant", "reasoning"),
        ("assistant", "reasoning"),
        ("assistant", "tool_call"),
    ]


def test_upstream_errors_and_memlanes_own_reach_the_client_in_anthropics_shape(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    sdk = client(proxy)
    messages = [{"role": "user", "content": "hi"}]

    anthropic_upstream.script(Fail(529, "Overloaded"))
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        sdk.messages.create(model=MODEL, max_tokens=9, messages=messages)
    assert overloaded.value.status_code == 529
    error = {"type": "overloaded_error", "message": "Overloaded"}
    assert overloaded.value.body == {"type": "error", "error": error}

    anthropic_upstream.script(Fail(500, raw_body="<html>gateway broke</html>"))
    with pytest.raises(anthropic.InternalServerError) as wrapped:
        sdk.messages.create(model=MODEL, max_tokens=9, messages=messages)
    assert wrapped.value.body["type"] == "error"
    assert wrapped.value.body["error"]["type"] == "api_error"
    assert "gateway broke" in wrapped.value.body["error"]["message"]

    with pytest.raises(anthropic.BadRequestError) as bad:
        sdk.messages.create(model=MODEL, max_tokens=9, messages=[{"role": "robot", "content": "x"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    assert "messages[0].role" in bad.value.body["error"]["message"]

    response = httpx.post(
        f"{proxy.base}/v1/messages",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error"

    refused = httpx.post(f"{proxy.base}/v1/messages", json={}, headers={"host": "evil.example"})
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"

    # each upstream failure left the user's turn marked failed; bad input stored nothing
    session = proxy.store.find_session("conv-1")
    assert [m.status for m in proxy.store.list_messages(session.id)] == ["failed", "failed"]


def test_an_unreachable_anthropic_upstream_is_a_502_in_anthropics_shape(
    anthropic_proxy: AnthropicProxy,
) -> None:
    proxy = anthropic_proxy(anthropic_upstream_url="http://127.0.0.1:9")
    with pytest.raises(anthropic.APIStatusError) as failed:
        client(proxy).messages.create(
            model=MODEL, max_tokens=9, messages=[{"role": "user", "content": "hi"}]
        )
    assert failed.value.status_code == 502
    assert failed.value.body["error"]["type"] == "api_error"


def test_the_preflight_refusal_says_prompt_is_too_long(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy(governance_context_windows={"claude-tiny": 2_000})
    huge = "word " * 5_000
    with pytest.raises(anthropic.BadRequestError) as refused:
        client(proxy).messages.create(
            model="claude-tiny", max_tokens=9, messages=[{"role": "user", "content": huge}]
        )
    error = refused.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("prompt is too long: ")
    assert " tokens > " in error["message"]
    assert anthropic_upstream.message_requests == []


def test_count_tokens_is_forwarded_or_counted_and_never_stored(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    sdk = client(proxy)
    messages = [{"role": "user", "content": "How many tokens is this?"}]
    counted = sdk.messages.count_tokens(model=MODEL, messages=messages)
    assert anthropic_upstream.last.path == "/v1/messages/count_tokens"
    assert counted.input_tokens == 1000 + len(json.dumps(messages))

    anthropic_upstream.count_route = False
    own = sdk.messages.count_tokens(model=MODEL, system="Be brief.", messages=messages)
    assert 10 < own.input_tokens < 40  # memlane's own count of system + messages

    assert proxy.store.list_sessions() == []
    assert anthropic_upstream.message_requests == []


def test_probes_and_requests_without_user_content_are_forwarded_but_not_turns(
    proxy_factory: Any, anthropic_upstream: ScriptedAnthropic, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(anthropic_upstream_url=anthropic_upstream.base, index_enabled=False)
    sdk = client(proxy)
    anthropic_upstream.script(Turn(text="ok"), Turn(text="ok"), Turn(text="ok"))
    sdk.messages.create(model=MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}])
    reminder = "<system-reminder>\nToday is Monday.\n</system-reminder>"
    sdk.messages.create(
        model=MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": [{"type": "text", "text": reminder}]}],
    )
    with sdk.messages.stream(
        model=MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}]
    ) as stream:
        assert stream.get_final_message().content[0].text == "ok"
    proxy.drain()

    assert len(anthropic_upstream.message_requests) == 3
    assert proxy.store.list_sessions() == []
    assert upstream.requests == []  # no fact extraction, no indexing was started


def test_the_billing_header_changing_per_request_does_not_break_dedupe(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    sdk = client(proxy)
    history: list[dict[str, Any]] = [{"role": "user", "content": "first"}]
    for turn, version in enumerate(("2.1.330.25d", "2.1.330.79c", "2.1.330.0f1")):
        system = [
            {"type": "text", "text": f"x-anthropic-billing-header: cc_version={version};"},
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
        ]
        answer = sdk.messages.create(model=MODEL, max_tokens=9, system=system, messages=history)
        assert anthropic_upstream.last.json["system"] == system  # forwarded untouched
        history += [
            {"role": "assistant", "content": blocks_of(answer)},
            {"role": "user", "content": f"turn {turn + 2}"},
        ]

    rows = stored(proxy, "conv-1", include_superseded=True)
    assert [r[3] for r in rows if r[0] == "user"] == ["first", "turn 2", "turn 3"]
    assert {r[4] for r in rows} == {"ok"}


def test_the_anthropic_upstream_key_is_used_only_when_the_client_sends_none(
    proxy_factory: Any, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = proxy_factory(
        anthropic_upstream_url=anthropic_upstream.base,
        anthropic_api_key="sk-ant-server-key-abcdef",
        upstream_api_key="sk-openai-server-key-abcdef",
        memory_enabled=False,
        index_enabled=False,
    )
    body = {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    base = {"anthropic-version": "2023-06-01", "x-memlane-session": "keys"}
    httpx.post(f"{proxy.base}/v1/messages", json=body, headers=base).raise_for_status()
    assert anthropic_upstream.last.headers["x-api-key"] == "sk-ant-server-key-abcdef"
    assert "authorization" not in anthropic_upstream.last.headers

    httpx.post(
        f"{proxy.base}/v1/messages?beta=true", json=body, headers={**base, "x-api-key": KEY}
    ).raise_for_status()
    assert anthropic_upstream.last.headers["x-api-key"] == KEY
    assert anthropic_upstream.last.path == "/v1/messages"
    assert anthropic_upstream.queries[-1] == "beta=true"
    home = Path(proxy.settings.home_path)
    for secret in (KEY, "sk-ant-server-key-abcdef"):
        leaked = [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert leaked == []


def test_the_clients_anthropic_key_is_lent_to_the_anthropic_upstream_only(
    proxy_factory: Any, anthropic_upstream: ScriptedAnthropic, upstream: ScriptedUpstream
) -> None:
    """memlane's own calls for a Messages turn go where the turn went, with its key (held in
    memory only): never to the OpenAI-compatible upstream, never into the home."""
    proxy = proxy_factory(anthropic_upstream_url=anthropic_upstream.base)
    anthropic_upstream.script(Turn(text="Noted."))
    client(proxy).messages.create(
        model=MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": "I live in Bergen and I prefer tea over coffee."}],
    )
    proxy.drain()

    sent, *own_calls = anthropic_upstream.message_requests
    assert own_calls  # fact extraction ran, against the Anthropic upstream
    credential = {k: v for k, v in sent.headers.items() if k in ("x-api-key", "authorization")}
    assert KEY in " ".join(credential.values())
    for call in own_calls:  # the key as the client sent it
        assert {k: call.headers.get(k) for k in credential} == credential
    assert all(KEY not in " ".join(r.headers.values()) for r in upstream.requests)
    assert all(KEY.encode() not in r.body for r in upstream.requests)
    home = Path(proxy.settings.home_path)
    assert [p for p in home.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()] == []


def test_an_upstream_prompt_too_long_teaches_memlane_the_window(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    sdk = client(proxy)
    messages = [{"role": "user", "content": "hi"}]
    anthropic_upstream.script(ContextLengthExceeded(tokens=150_000, limit=120_000))
    with pytest.raises(anthropic.BadRequestError) as refused:
        sdk.messages.create(model=MODEL, max_tokens=9, messages=messages)
    assert refused.value.body["error"]["message"].startswith("prompt is too long")

    response = sdk.messages.with_raw_response.create(model=MODEL, max_tokens=9, messages=messages)
    context = dict(p.split("=") for p in response.headers["x-memlane-context"].split("; "))
    assert int(context["limit"]) == 120_000 - proxy.settings.governance_safety_margin
