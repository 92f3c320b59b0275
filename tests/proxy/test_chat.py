"""Chat Completions through the proxy with the official SDK: forwarded, relayed, stored."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.proxy.conftest import async_sdk, sdk, stored
from tests.support.upstream import Reply, RunningProxy, ScriptedUpstream, ToolCallSpec


def test_non_streaming_answer_is_relayed_and_both_turns_stored(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="Paris.", usage=(30, 2)))
    answer = sdk(mproxy, "chat-1").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Capital of France?"}]
    )
    assert answer.choices[0].message.content == "Paris."
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == 30
    rows = stored(mproxy, "chat-1")
    assert [(r[0], r[3]) for r in rows if r[2] == "client"] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    session = mproxy.store.find_session("chat-1")
    assert (session.prompt_tokens, session.completion_tokens) == (30, 2)


def test_headers_are_stripped_and_authorization_passed_upstream(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    client = sdk(mproxy, "chat-h", **{"X-Memlane-Todo": "t", "X-Custom-Thing": "kept"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    headers = upstream.last.headers
    assert not [name for name in headers if name.startswith("x-memlane-")]
    assert headers["authorization"] == "Bearer sk-client"
    assert headers["x-custom-thing"] == "kept"


def test_upstream_key_is_used_only_when_the_client_sends_none(
    proxy_factory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(memory_enabled=False, index_enabled=False, upstream_api_key="sk-up")
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    httpx.post(f"{proxy.url}/chat/completions", json=body).raise_for_status()
    assert upstream.last.headers["authorization"] == "Bearer sk-up"
    sdk(proxy).chat.completions.create(**body)
    assert upstream.last.headers["authorization"] == "Bearer sk-client"


def test_unknown_fields_are_forwarded_untouched_and_unchanged_bodies_byte_for_byte(
    proxy_factory, upstream: ScriptedUpstream
) -> None:
    # scaffold_clients=agentic and a plain httpx client: nothing is injected, the bytes pass as sent
    proxy = proxy_factory(memory_enabled=False, index_enabled=False)
    raw = (
        b'{ "model" : "m", "future_field": {"x": [1, 2]}, "temperature": 0.25,\n'
        b' "messages": [{"role": "user", "content": "hi", "name": "ann"}] }'
    )
    response = httpx.post(
        f"{proxy.url}/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-memlane-session": "bytes"},
    )
    assert response.status_code == 200
    assert upstream.last.body == raw


def test_streaming_text_is_relayed_and_assembled(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="a streamed answer in pieces", chunk_size=3))
    stream = sdk(mproxy, "chat-s").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], stream=True
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(pieces) == "a streamed answer in pieces"
    assert len([p for p in pieces if p]) == 9  # relayed chunk by chunk, not re-chunked
    assert stored(mproxy, "chat-s")[-1][:4] == (
        "assistant",
        "message",
        "client",
        "a streamed answer in pieces",
    )


def test_streamed_tool_calls_are_assembled_with_their_arguments(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    calls = [
        ToolCallSpec("read_file", '{"path": "src/app.py"}', "call_a"),
        ToolCallSpec("grep", '{"pattern": "TODO", "path": "."}', "call_b"),
    ]
    upstream.script(Reply(text="", tool_calls=calls, chunk_size=5))
    stream = sdk(mproxy, "chat-t").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "look"}], stream=True
    )
    list(stream)
    session = mproxy.store.find_session("chat-t")
    last = mproxy.store.list_messages(session.id)[-1].message
    assert last.kind == "tool_call"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in last.tool_calls] == [
        ("call_a", "read_file", {"path": "src/app.py"}),
        ("call_b", "grep", {"pattern": "TODO", "path": "."}),
    ]
    assert not last.is_transcript  # tool chatter is stored, marked out of the transcript


async def test_async_client_streaming_and_not(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    client = async_sdk(mproxy, "chat-async")
    first = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "one"}]
    )
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "two"},
    ]
    stream = await client.chat.completions.create(model="m", messages=history, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "echo: two"
    await client.close()
    assert [r[3] for r in stored(mproxy, "chat-async") if r[2] == "client"] == [
        "one",
        "echo: one",
        "two",
        "echo: two",
    ]


def test_twenty_turns_are_stored_once_each_in_order(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """Clients resend the whole history each turn; each message is stored exactly once."""
    client = sdk(mproxy, "twenty")
    history: list[dict[str, object]] = [{"role": "system", "content": "be brief"}]
    expected: list[tuple[str, str, str]] = [("system", "message", "be brief")]
    for turn in range(20):
        history.append({"role": "user", "content": f"question {turn}"})
        expected.append(("user", "message", f"question {turn}"))
        if turn % 4 == 3:  # every fourth turn the assistant calls a tool first
            arguments = f'{{"n": {turn}}}'
            upstream.script(Reply(tool_calls=[ToolCallSpec("lookup", arguments, f"c{turn}")]))
            stream = client.chat.completions.create(model="m", messages=history, stream=True)
            list(stream)
            call = {"id": f"c{turn}", "type": "function"}
            call["function"] = {"name": "lookup", "arguments": f'{{"n": {turn}}}'}
            history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            result = {"role": "tool", "tool_call_id": f"c{turn}", "content": f"result {turn}"}
            history.append(result)
            expected += [("assistant", "tool_call", ""), ("tool", "tool_result", f"result {turn}")]
        upstream.script(Reply(text=f"answer {turn}"))
        stream = client.chat.completions.create(model="m", messages=history, stream=turn % 2 == 0)
        text = (
            "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            if turn % 2 == 0
            else stream.choices[0].message.content
        )
        assert text == f"answer {turn}"
        history.append({"role": "assistant", "content": text})
        expected.append(("assistant", "message", f"answer {turn}"))
    rows = [r for r in stored(mproxy, "twenty") if r[2] == "client"]
    assert [(*r[:2], r[3]) for r in rows] == expected
    assert all(r[4] == "ok" for r in rows)
    assert len(upstream.model_requests) == 25


def test_models_are_passed_through(mproxy: RunningProxy, upstream: ScriptedUpstream) -> None:
    models = sdk(mproxy).models.list()
    assert [m.id for m in models] == list(ScriptedUpstream.MODELS)
    assert upstream.last.path == "/v1/models"
    assert upstream.last.headers["authorization"] == "Bearer sk-client"


def test_health_and_openapi(mproxy: RunningProxy) -> None:
    assert httpx.get(f"{mproxy.base}/health").json()["status"] == "ok"
    paths = httpx.get(f"{mproxy.base}/openapi.json").json()["paths"]
    assert {"/v1/chat/completions", "/v1/responses", "/v1/models"} <= set(paths)
    assert "/v1/memlane/sessions" in paths


def test_sdk_errors_keep_openai_shape(mproxy: RunningProxy) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(mproxy).chat.completions.create(model="m", messages=[])
    assert caught.value.status_code == 400
    assert caught.value.param == "messages"


def test_a_long_history_edited_in_the_middle_is_stored_as_edited(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """A resent history reuses what its items parsed into last time (`types.resent`), up to
    the first item that changed: a client that rewrites an old message (compaction, an
    edited prompt) has the rewrite forwarded and stored, not what it said before."""
    client = sdk(mproxy, "edited")
    history: list[dict[str, object]] = [{"role": "system", "content": "be brief"}]
    for turn in range(12):
        history += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
    history.append({"role": "user", "content": "question 12"})
    upstream.script(Reply(text="answer 12"))
    client.chat.completions.create(model="m", messages=history)
    resent = [dict(item) for item in history]
    resent[7] = {"role": "user", "content": "question 3, rewritten"}
    resent += [
        {"role": "assistant", "content": "answer 12"},
        {"role": "user", "content": "question 13"},
    ]
    upstream.script(Reply(text="answer 13"))
    client.chat.completions.create(model="m", messages=resent)

    assert upstream.model_requests[-1].messages[7]["content"] == "question 3, rewritten"
    texts = [r[3] for r in stored(mproxy, "edited") if r[2] == "client" and r[4] == "ok"]
    assert texts[:7] == [item["content"] for item in history[:7]]
    assert "question 3, rewritten" in texts
    assert "question 3" not in texts
