"""memlane's own tools through the proxy for Anthropic Messages clients (the `anthropic` SDK).

The scripted Anthropic upstream first answers with a `tool_use` of
`memlane_memory_search`; memlane runs it, sends the call back with a `tool_result`
block, asks again, and the client receives only the final answer, streamed or not.
Thinking blocks of a round go back upstream with their signatures; a round that
also calls the client's tools reaches the client without memlane's call.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from memlane.engine.memory import manage
from memlane.proxy.tool_loop import LIMIT_ANSWER, ROUND_EVENT
from tests.proxy.conftest import stored
from tests.support.anthropic_upstream import (
    AnthropicProxy,
    ScriptedAnthropic,
    Turn,
    anthropic_sdk,
    signature,
)
from tests.support.upstream import RecordedRequest, RunningProxy, ToolCallSpec

MODEL = "claude-sonnet-4-6"
FACT = "The shop deploys with make ship"
FINAL = "You deploy with make ship."
THOUGHT = "The user asks about deploys; memlane's memory may know."
SEARCH = ToolCallSpec("memlane_memory_search", '{"query": "how do we deploy"}', id="toolu_m1")
WEATHER = ToolCallSpec("get_weather", '{"city": "Oslo"}', id="toolu_w1")
WEATHER_TOOL: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TOOLS_ON: dict[str, Any] = {
    "upstream_price_input": 1.0,
    "upstream_price_output": 2.0,
    "memory_enabled": True,
    "memory_extract_facts": False,
    "memory_store_turns": False,
}
ASK: Any = [{"role": "user", "content": "How do we deploy?"}]


def tools_proxy(anthropic_proxy: AnthropicProxy, **overrides: Any) -> RunningProxy:
    proxy = anthropic_proxy(**(TOOLS_ON | overrides))
    proxy.call(lambda: manage.add_memory(proxy.runtime, FACT, scope="ns:shop"))
    return proxy


def claude(proxy: RunningProxy, session: str, tools: str = "memory") -> anthropic.Anthropic:
    headers = {"X-Claude-Code-Session-Id": session, "X-Memlane-Repo": "shop"}
    return anthropic_sdk(proxy, **headers, **{"X-Memlane-Tools": tools})


def ask(sdk: anthropic.Anthropic, *, stream: bool, **extra: Any) -> Any:
    """The final message the SDK assembles, streamed or not."""
    if stream:
        with sdk.messages.stream(model=MODEL, max_tokens=200, messages=ASK, **extra) as events:
            return events.get_final_message()
    return sdk.messages.create(model=MODEL, max_tokens=200, messages=ASK, **extra)


def tool_names(request: RecordedRequest) -> list[str]:
    return [tool["name"] for tool in request.json.get("tools", [])]


@pytest.mark.parametrize("stream", [False, True])
def test_the_client_sees_only_the_final_answer(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic, stream: bool
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    anthropic_upstream.script(Turn(tool_calls=[SEARCH]), Turn(text=FINAL))
    message = ask(claude(proxy, f"final-{stream}"), stream=stream)

    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", FINAL)]
    assert message.stop_reason == "end_turn"
    first, second = anthropic_upstream.message_requests
    (offered,) = [t for t in first.json["tools"] if t["name"] == "memlane_memory_search"]
    assert set(offered) == {"name", "description", "input_schema"}  # Anthropic's shape
    assert offered["input_schema"]["required"] == ["query"]
    assert first.json["messages"][-1]["content"][-1] == {"type": "text", "text": ASK[0]["content"]}
    assistant, results = second.json["messages"][-2:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_m1",
                "name": "memlane_memory_search",
                "input": {"query": "how do we deploy"},
            }
        ],
    }
    (result,) = results["content"]
    assert results["role"] == "user"
    assert (result["type"], result["tool_use_id"]) == ("tool_result", "toolu_m1")
    assert FACT in result["content"]
    assert "<memlane-memory>" in result["content"]  # the result is fenced as data

    proxy.drain()
    session = proxy.store.find_session(f"final-{stream}")
    (event,) = proxy.store.list_events(session.id, kind=ROUND_EVENT)
    assert event.payload["wire"] == "anthropic"
    assert event.payload["calls"][0]["name"] == "memlane_memory_search"
    assert FACT in event.payload["calls"][0]["result"]
    assert event.payload["usage"] == {"prompt_tokens": 11, "completion_tokens": 7}
    assert event.payload["cost_usd"] == pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6)
    assert session.prompt_tokens == 22  # both rounds count in the session's usage and cost
    assert session.cost_usd == pytest.approx(2 * (11 * 1.0 + 7 * 2.0) / 1e6)
    assert stored(proxy, f"final-{stream}") == [
        ("user", "message", "client", "How do we deploy?", "ok"),
        ("assistant", "message", "client", FINAL, "ok"),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_of_a_round_goes_back_upstream_byte_exact(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic, stream: bool
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    second_search = ToolCallSpec(SEARCH.name, '{"query": "ship"}', id="toolu_m2")
    anthropic_upstream.script(
        Turn(reasoning=THOUGHT, redacted="opaque-redacted", tool_calls=[SEARCH, second_search]),
        Turn(reasoning="Now I know.", text=FINAL),
    )
    message = ask(claude(proxy, f"thinking-{stream}"), stream=stream)

    # the client's answer is the final round's, thinking included
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].signature == signature("Now I know.")
    assistant, results = anthropic_upstream.message_requests[1].json["messages"][-2:]
    assert assistant["content"][:2] == [
        {"type": "redacted_thinking", "data": "opaque-redacted"},
        {"type": "thinking", "thinking": THOUGHT, "signature": signature(THOUGHT)},
    ]
    assert [b["id"] for b in assistant["content"][2:]] == ["toolu_m1", "toolu_m2"]
    # both results in one user turn, in the calls' order
    assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [
        ("tool_result", "toolu_m1"),
        ("tool_result", "toolu_m2"),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_that_keeps_calling_stops_at_the_round_limit(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic, stream: bool
) -> None:
    proxy = tools_proxy(anthropic_proxy, proxy_tools_max_rounds=2)
    anthropic_upstream.respond_with(lambda request: Turn(tool_calls=[SEARCH]))
    message = ask(claude(proxy, f"loop-{stream}"), stream=stream)

    text = LIMIT_ANSWER.format(rounds=2)
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", text)]
    assert len(anthropic_upstream.message_requests) == 3  # the first ask and two more
    proxy.drain()
    session = proxy.store.find_session(f"loop-{stream}")
    rounds = proxy.store.list_events(session.id, kind=ROUND_EVENT)
    assert [e.payload["round"] for e in rounds] == [1, 2, 2]
    assert rounds[-1].payload["calls"][0]["unanswered"] is True
    assert stored(proxy, f"loop-{stream}")[-1][3] == text


def test_client_tools_and_memlanes_together(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    anthropic_upstream.script(Turn(reasoning=THOUGHT, tool_calls=[SEARCH, WEATHER]))
    sdk = claude(proxy, "mixed")
    messages: Any = [{"role": "user", "content": "Deploy, and what is the weather?"}]
    tools = [WEATHER_TOOL]
    first = sdk.messages.create(model=MODEL, max_tokens=200, messages=messages, tools=tools)

    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert (first.content[1].id, first.content[1].name) == ("toolu_w1", "get_weather")
    assert first.stop_reason == "tool_use"  # the client has its own call to run
    assert tool_names(anthropic_upstream.message_requests[0]) == [
        "get_weather",
        "memlane_memory_search",
    ]
    proxy.drain()
    turn = [
        *messages,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_w1", "content": "sunny"}],
        },
    ]
    anthropic_upstream.script(Turn(text=FINAL), Turn(text="Again."))
    second = sdk.messages.create(model=MODEL, max_tokens=200, messages=turn, tools=tools)
    assert second.content[0].text == FINAL  # type: ignore[union-attr]
    sent = anthropic_upstream.message_requests[1].json["messages"]
    assert sent[1]["content"][0] == {
        "type": "thinking",
        "thinking": THOUGHT,
        "signature": signature(THOUGHT),
    }
    last = sent[-1]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "toolu_w1", "content": "sunny"}
    owed = last[-1]["text"]  # memlane's own result, owed from the last turn, after the result
    assert owed.startswith("<memlane-memory>\nResults of memlane's tools you called")
    assert 'memlane_memory_search({"query": "how do we deploy"})' in owed
    assert FACT in owed
    sdk.messages.create(model=MODEL, max_tokens=200, messages=turn, tools=tools)
    assert "Results of memlane's tools" not in json.dumps(anthropic_upstream.last.json)  # once


def test_streamed_client_tools_arrive_without_memlanes(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    anthropic_upstream.script(Turn(reasoning=THOUGHT, tool_calls=[SEARCH, WEATHER]))
    sdk = claude(proxy, "mixed-stream")
    with sdk.messages.stream(
        model=MODEL, max_tokens=200, messages=ASK, tools=[WEATHER_TOOL]
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()

    starts = [e for e in events if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [(0, "thinking"), (1, "tool_use")]
    assert {e.index for e in events if e.type == "content_block_delta"} == {0, 1}
    assert [b.type for b in message.content] == ["thinking", "tool_use"]
    assert message.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert message.content[0].signature == signature(THOUGHT)  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"
    proxy.drain()
    session = proxy.store.find_session("mixed-stream")
    assert FACT in proxy.store.get_state(session.id)["proxy_tools_pending"]
    rows = proxy.store.list_messages(session.id)
    assert [c.name for r in rows for c in r.message.tool_calls] == ["get_weather"]


def test_a_streamed_answer_that_starts_with_text_is_relayed_without_memlanes_call(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    anthropic_upstream.script(Turn(text="Let me look that up.", tool_calls=[SEARCH]))
    with claude(proxy, "talker").messages.stream(
        model=MODEL, max_tokens=200, messages=ASK
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()

    assert not [e for e in events if e.type == "content_block_start" and e.index > 0]
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [
        ("text", "Let me look that up.")
    ]
    assert message.stop_reason == "end_turn"  # nothing is left for the client to run
    assert len(anthropic_upstream.message_requests) == 1  # relayed as it came: no second round
    proxy.drain()
    session = proxy.store.find_session("talker")
    rows = proxy.store.list_messages(session.id)
    assert rows[-1].message.text == "Let me look that up."
    assert not any(c.name.startswith("memlane_") for r in rows for c in r.message.tool_calls)
    assert FACT in proxy.store.get_state(session.id)["proxy_tools_pending"]


def test_without_the_opt_in_nothing_is_added_and_a_bad_group_is_refused(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    plain = anthropic_sdk(proxy, **{"X-Claude-Code-Session-Id": "plain"})
    plain.messages.create(model=MODEL, max_tokens=20, messages=ASK)
    assert "tools" not in anthropic_upstream.last.json

    with pytest.raises(anthropic.BadRequestError) as refused:
        claude(proxy, "bad", tools="memory,everything").messages.create(
            model=MODEL, max_tokens=20, messages=ASK
        )
    body: Any = refused.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "memory, sessions, all or off" in body["error"]["message"]
    assert proxy.store.find_session("bad") is None
    assert len(anthropic_upstream.message_requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_searches_only_the_callers_tenant(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic, stream: bool
) -> None:
    from memlane.engine.memory.scopes import namespace_scope
    from memlane.engine.tenancy import tenant_of

    proxy = anthropic_proxy(**(TOOLS_ON | {"tenancy": "credential"}))
    owner_key, other_key = "sk-ant-owner-0123456789abcdef", "sk-ant-other-0123456789abcdef"
    scope = namespace_scope("shop", tenant_of(proxy.runtime.tenant_salt, owner_key))
    proxy.call(lambda: manage.add_memory(proxy.runtime, FACT, scope=scope))
    for key, sees in ((other_key, False), (owner_key, True)):
        anthropic_upstream.script(Turn(tool_calls=[SEARCH]), Turn(text=FINAL))
        sdk = anthropic_sdk(
            proxy, api_key=key, **{"X-Memlane-Repo": "shop", "X-Memlane-Tools": "memory"}
        )
        assert ask(sdk, stream=stream).content[0].text == FINAL
        (result,) = anthropic_upstream.message_requests[-1].json["messages"][-1]["content"]
        assert result["type"] == "tool_result"
        assert (FACT in result["content"]) is sees, result["content"]
        sent = anthropic_upstream.message_requests[-1].headers
        assert key in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))


def test_every_round_counts_its_cache_tokens(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = tools_proxy(anthropic_proxy)
    anthropic_upstream.script(
        Turn(tool_calls=[SEARCH], cache_read=100, cache_creation=20),
        Turn(text=FINAL, cache_read=300),
    )
    ask(claude(proxy, "cached"), stream=True)

    proxy.drain()
    session = proxy.store.find_session("cached")
    (event,) = proxy.store.list_events(session.id, kind=ROUND_EVENT)
    # the round's prompt is what it cost: input, cache read and cache written together
    assert event.payload["usage"] == {"prompt_tokens": 11 + 100 + 20, "completion_tokens": 7}
    assert session.prompt_tokens == (11 + 100 + 20) + (11 + 300)
    assert session.completion_tokens == 14
