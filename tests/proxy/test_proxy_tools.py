"""memlane's own tools through the proxy, with the official `openai` SDK as the client.

The scripted upstream first answers with a call to `memlane_memory_search`; memlane
runs it, appends the call and its result, asks again, and the client receives only
the final answer (Chat Completions and Responses, streamed and not).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest

from memlane.engine import turn_store
from memlane.engine.memory import manage
from memlane.engine.sessions.query import QUERY_PROMPT
from memlane.proxy.tool_loop import LIMIT_ANSWER, ROUND_EVENT
from memlane.store import NewMessage
from memlane.types import Message
from tests.proxy.conftest import sdk, stored
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    ToolCallSpec,
    closing,
)

TOOLS_ON: dict[str, Any] = {
    "upstream_price_input": 1.0,
    "upstream_price_output": 2.0,
    "memory_enabled": True,
    "memory_extract_facts": False,
    "memory_store_turns": False,
    "index_enabled": False,
}
FACT = "The shop deploys with make ship"
FINAL = "You deploy with make ship."
SEARCH = ToolCallSpec("memlane_memory_search", '{"query": "how do we deploy"}', id="call_m1")


def tools_proxy(proxy_factory: ProxyFactory, **overrides: Any) -> RunningProxy:
    proxy = proxy_factory(**(TOOLS_ON | overrides))
    proxy.call(lambda: manage.add_memory(proxy.runtime, FACT, scope="ns:shop"))
    return proxy


def client(proxy: RunningProxy, session: str, tools: str = "memory") -> openai.OpenAI:
    return sdk(proxy, session, **{"X-Memlane-Repo": "shop", "X-Memlane-Tools": tools})


def tool_names(request: Any) -> list[str]:
    names = []
    for tool in request.json.get("tools", []):
        names.append(tool["function"]["name"] if "function" in tool else tool["name"])
    return names


def assert_the_rounds_were_kept(proxy: RunningProxy, key: str) -> None:
    proxy.drain()
    session = proxy.store.find_session(key)
    assert session is not None
    events = proxy.store.list_events(session.id, kind=ROUND_EVENT)
    assert len(events) == 1
    call = events[0].payload["calls"][0]
    assert call["name"] == "memlane_memory_search"
    assert FACT in call["result"]
    assert events[0].payload["usage"] == {"prompt_tokens": 11, "completion_tokens": 7}
    assert events[0].payload["cost_usd"] == pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6)
    assert session.prompt_tokens == 22  # both rounds count in the session's usage and cost
    assert session.cost_usd == pytest.approx(2 * (11 * 1.0 + 7 * 2.0) / 1e6)
    assert [(r, t) for r, _k, _o, t, _s in stored(proxy, key)][-1] == ("assistant", FINAL)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_client_sees_only_the_final_answer(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, stream: bool
) -> None:
    proxy = tools_proxy(proxy_factory)
    upstream.script(Reply(tool_calls=[SEARCH]), Reply(text=FINAL))
    messages: Any = [{"role": "user", "content": "How do we deploy?"}]
    chat = client(proxy, f"chat-{stream}").chat.completions
    if stream:
        usage: Any = {"include_usage": True}  # streamed Chat reports usage only when asked
        chunks = list(
            chat.create(
                model="scripted-small", messages=messages, stream=True, stream_options=usage
            )
        )
        assert all(not c.choices or c.choices[0].delta.tool_calls is None for c in chunks)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = chat.create(model="scripted-small", messages=messages)
        assert answer.choices[0].message.tool_calls is None
        text = answer.choices[0].message.content or ""
    assert text == FINAL
    first, second = upstream.model_requests
    assert "memlane_memory_search" in tool_names(first)
    sent = second.json["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "memlane_memory_search"
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["tool_call_id"] == "call_m1"
    assert FACT in sent[-1]["content"]
    assert "<memlane-memory>" in sent[-1]["content"]  # the result is fenced as data
    assert_the_rounds_were_kept(proxy, f"chat-{stream}")


def test_a_new_sessions_round_is_kept_when_its_row_is_written_after_the_round(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session's row is written behind its first request (`engine.sessions.ahead`);
    memlane's calls wait for it before they run and the round is recorded on the session."""
    proxy = tools_proxy(proxy_factory)
    write = turn_store.write_made

    def slow_write(store: Any, session: Any) -> Any:
        time.sleep(0.5)  # far longer than the scripted upstream's first round
        return write(store, session)

    monkeypatch.setattr(turn_store, "write_made", slow_write)
    upstream.script(Reply(tool_calls=[SEARCH]), Reply(text=FINAL))
    answer = client(proxy, "slow-row").chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "How do we deploy?"}]
    )
    assert answer.choices[0].message.content == FINAL
    assert_the_rounds_were_kept(proxy, "slow-row")


@pytest.mark.parametrize("stream", [False, True])
def test_responses_client_sees_only_the_final_answer(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, stream: bool
) -> None:
    proxy = tools_proxy(proxy_factory)
    upstream.script(Reply(tool_calls=[SEARCH]), Reply(text=FINAL))
    responses = client(proxy, f"resp-{stream}").responses
    if stream:
        events = list(
            responses.create(model="scripted-small", input="How do we deploy?", stream=True)
        )
        assert not any("function_call" in e.type for e in events)
        assert not any(
            getattr(getattr(e, "item", None), "type", "") == "function_call" for e in events
        )
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    else:
        answer = responses.create(model="scripted-small", input="How do we deploy?")
        assert [item.type for item in answer.output] == ["message"]
        text = answer.output_text
    assert text == FINAL
    first, second = upstream.model_requests
    assert "memlane_memory_search" in tool_names(first)
    items = second.json["input"]
    assert items[-2]["type"] == "function_call"
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "call_m1",
        "output": items[-1]["output"],
    }
    assert FACT in items[-1]["output"]
    assert_the_rounds_were_kept(proxy, f"resp-{stream}")


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_that_keeps_calling_stops_at_the_round_limit(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, stream: bool
) -> None:
    proxy = tools_proxy(proxy_factory, proxy_tools_max_rounds=2)
    upstream.respond_with(lambda request: Reply(tool_calls=[SEARCH]))
    chat = client(proxy, f"loop-{stream}").chat.completions
    messages: Any = [{"role": "user", "content": "How do we deploy?"}]
    if stream:
        chunks = chat.create(model="scripted-small", messages=messages, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = chat.create(model="scripted-small", messages=messages).choices[0].message.content
    assert text == LIMIT_ANSWER.format(rounds=2)
    assert len(upstream.model_requests) == 3  # the first ask and two more
    proxy.drain()
    assert stored(proxy, f"loop-{stream}")[-1][3] == text


def test_client_tools_and_memlanes_together(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = tools_proxy(proxy_factory)
    weather = ToolCallSpec("get_weather", '{"city": "Oslo"}', id="call_w1")
    upstream.script(Reply(tool_calls=[SEARCH, weather]), Reply(text=FINAL))
    chat = client(proxy, "mixed").chat.completions
    own_tool: Any = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    messages: Any = [{"role": "user", "content": "Deploy, and what is the weather?"}]
    first = chat.create(model="scripted-small", messages=messages, tools=[own_tool])
    calls = first.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name) for c in calls] == [("call_w1", "get_weather")]
    assert tool_names(upstream.model_requests[0]) == ["get_weather", "memlane_memory_search"]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny"},
    ]
    second = chat.create(model="scripted-small", messages=messages, tools=[own_tool])
    assert second.choices[0].message.content == FINAL
    sent = upstream.model_requests[1].json["messages"]
    assert {"role": "tool", "tool_call_id": "call_w1", "content": "sunny"} in sent
    owed = sent[-1]["content"]  # memlane's own result, owed from the last turn
    assert owed.startswith("<memlane-memory>\nResults of memlane's tools you called")
    assert 'memlane_memory_search({"query": "how do we deploy"})' in owed
    assert FACT in owed
    third = chat.create(model="scripted-small", messages=messages, tools=[own_tool])
    assert third.choices[0].message.content
    assert "Results of memlane's tools" not in str(upstream.model_requests[2].json)  # once


def test_without_the_opt_in_nothing_is_added(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = tools_proxy(proxy_factory)
    sdk(proxy, "plain", **{"X-Memlane-Repo": "shop"}).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}]
    )
    assert "tools" not in upstream.last.json
    on = tools_proxy(proxy_factory, proxy_tools=True)
    sdk(on, "plain", **{"X-Memlane-Repo": "shop"}).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}]
    )
    assert tool_names(upstream.last) == ["memlane_memory_search", "memlane_session_ask"]
    sdk(on, "off", **{"X-Memlane-Tools": "off"}).chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "hi"}]
    )
    assert "tools" not in upstream.last.json


def test_an_unknown_tool_group_is_refused_and_nothing_is_stored(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = tools_proxy(proxy_factory)
    with pytest.raises(openai.BadRequestError) as caught:
        client(proxy, "bad", tools="memory,everything").chat.completions.create(
            model="scripted-small", messages=[{"role": "user", "content": "hi"}]
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["code"] == "invalid_memlane_tools"
    assert "memory, sessions, all or off" in body["message"]
    assert proxy.store.find_session("bad") is None
    assert upstream.model_requests == []


def test_streamed_client_tools_arrive_without_memlanes(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = tools_proxy(proxy_factory)
    weather = ToolCallSpec("get_weather", '{"city": "Oslo"}', id="call_w1")
    own_chat: Any = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    upstream.script(Reply(tool_calls=[SEARCH, weather]))
    chunks = list(
        client(proxy, "mixed-chat").chat.completions.create(
            model="scripted-small",
            messages=[{"role": "user", "content": "weather?"}],
            tools=[own_chat],
            stream=True,
        )
    )
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert {d.index for d in deltas} == {0}
    assert [d.function.name for d in deltas if d.function and d.function.name] == ["get_weather"]
    assert "".join(d.function.arguments or "" for d in deltas if d.function) == '{"city": "Oslo"}'

    own_responses: Any = {"type": "function", "name": "get_weather", "parameters": {}}
    upstream.script(Reply(text="", tool_calls=[SEARCH, weather]))
    events = list(
        client(proxy, "mixed-resp").responses.create(
            model="scripted-small", input="weather?", tools=[own_responses], stream=True
        )
    )
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [(e.output_index, e.item.name) for e in done] == [(0, "get_weather")]  # type: ignore[union-attr]
    final = next(e for e in events if e.type == "response.completed")
    assert [item.name for item in final.response.output] == ["get_weather"]  # type: ignore[union-attr]
    proxy.drain()
    for key in ("mixed-chat", "mixed-resp"):
        session = proxy.store.find_session(key)
        assert session is not None
        assert FACT in proxy.store.get_state(session.id)["proxy_tools_pending"]


def test_the_model_asks_a_past_session_of_its_namespace_only(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = tools_proxy(proxy_factory, llm_model="scripted-small")
    store = proxy.store
    ours = store.ensure_session("db-talk", namespace="shop")
    store.append_messages(ours.id, [NewMessage(Message("user", "We chose PostgreSQL."), 1)])
    store.update_session(ours.id, metadata={"name": "orders-database"})
    theirs = store.ensure_session("secret-talk", namespace="other")
    store.update_session(theirs.id, metadata={"name": "falcon-plans"})
    ask = '{{"ref": "{ref}", "question": "Which database?"}}'
    calls = [
        ToolCallSpec("memlane_session_ask", ask.format(ref="orders-database"), id="c1"),
        ToolCallSpec("memlane_session_ask", ask.format(ref="falcon-plans"), id="c2"),
    ]

    def model(request: RecordedRequest) -> Reply | None:
        if str(request.messages[0].get("content", "")).startswith(QUERY_PROMPT[:40]):
            return Reply(text="PostgreSQL.")
        return None

    upstream.respond_with(model)
    upstream.script(Reply(tool_calls=calls), Reply(text="PostgreSQL, as decided."))
    answer = client(proxy, "asker", tools="sessions").chat.completions.create(
        model="scripted-small", messages=[{"role": "user", "content": "Which database?"}]
    )
    assert answer.choices[0].message.content == "PostgreSQL, as decided."
    results = {
        m["tool_call_id"]: m["content"]
        for m in upstream.model_requests[-1].json["messages"]
        if m["role"] == "tool"
    }
    assert "PostgreSQL." in results["c1"]
    assert "no session matches 'falcon-plans'" in results["c2"]
    proxy.drain()
    assert [e.payload["question"] for e in store.list_events(ours.id)] == ["Which database?"]
    assert store.list_events(theirs.id) == []


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_a_streamed_answer_that_starts_with_text_is_relayed_without_memlanes_calls(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, wire: str
) -> None:
    proxy = tools_proxy(proxy_factory)
    upstream.script(Reply(text="Let me look that up.", tool_calls=[SEARCH]))
    sdk_client = client(proxy, f"talker-{wire}")
    if wire == "chat":
        chunks = list(
            sdk_client.chat.completions.create(
                model="scripted-small",
                messages=[{"role": "user", "content": "How do we deploy?"}],
                stream=True,
            )
        )
        assert all(not c.choices or c.choices[0].delta.tool_calls is None for c in chunks)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert [r for r in reasons if r] == ["stop"]  # nothing is left for the client to run
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        events = list(
            sdk_client.responses.create(
                model="scripted-small", input="How do we deploy?", stream=True
            )
        )
        assert not any("function_call" in e.type for e in events)
        final = next(e for e in events if e.type == "response.completed")
        assert [item.type for item in final.response.output] == ["message"]  # type: ignore[union-attr]
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Let me look that up."
    assert len(upstream.model_requests) == 1  # relayed as it came: no second round
    proxy.drain()
    session = proxy.store.find_session(f"talker-{wire}")
    assert session is not None
    rows = proxy.store.list_messages(session.id)
    assert rows[-1].message.text == "Let me look that up."
    assert not any(c.name.startswith("memlane_") for r in rows for c in r.message.tool_calls)
    assert FACT in proxy.store.get_state(session.id)["proxy_tools_pending"]


def test_a_tool_call_searches_only_its_own_tenants_memory(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    from memlane.engine.memory.scopes import namespace_scope
    from memlane.engine.tenancy import tenant_of

    proxy = proxy_factory(**(TOOLS_ON | {"tenancy": "credential"}))
    owner = tenant_of(proxy.runtime.tenant_salt, "sk-owner-0123456789abcdef")
    scope = namespace_scope("shop", owner)
    proxy.call(lambda: manage.add_memory(proxy.runtime, FACT, scope=scope))
    headers = {"X-Memlane-Repo": "shop", "X-Memlane-Tools": "memory"}
    for key, sees in (("sk-other-0123456789abcdef", False), ("sk-owner-0123456789abcdef", True)):
        upstream.script(Reply(tool_calls=[SEARCH]), Reply(text=FINAL))
        other = closing(
            openai.OpenAI(base_url=proxy.url, api_key=key, max_retries=0, default_headers=headers)
        )
        other.chat.completions.create(
            model="scripted-small", messages=[{"role": "user", "content": "How do we deploy?"}]
        )
        result = upstream.model_requests[-1].json["messages"][-1]["content"]
        assert (FACT in result) is sees, result


def test_memlanes_calls_answered_aside_wait_for_a_busy_background_and_are_kept(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """The results of memlane's calls in a relayed answer are made by a spawned job and
    kept for the model's next request, and nothing else holds them: a background with
    no room for a job delays it, and does not drop it."""
    proxy = tools_proxy(proxy_factory)
    background = proxy.runtime.background
    background.max_pending = 0  # no room for a job
    upstream.script(Reply(text="Let me look that up.", tool_calls=[SEARCH]))
    chunks = client(proxy, "busy").chat.completions.create(
        model="scripted-small",
        messages=[{"role": "user", "content": "How do we deploy?"}],
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    proxy.settled()
    waited = time.monotonic() + 10
    while not (background.pending or background.dropped) and time.monotonic() < waited:
        time.sleep(0.01)  # until the answer's end has spawned the job
    status = httpx.get(f"{proxy.base}/v1/memlane/status", headers=proxy.admin).json()
    assert (status["background_pending"], status["background_dropped"]) == (1, 0)
    background.max_pending = 512  # room again
    proxy.drain()
    session = proxy.store.find_session("busy")
    assert session is not None
    assert FACT in proxy.store.get_state(session.id)["proxy_tools_pending"]
