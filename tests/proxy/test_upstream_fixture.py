"""The scripted upstream speaks OpenAI's wire formats well enough for the official SDK."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.upstream import (
    ContextLengthExceeded,
    CutStream,
    Fail,
    Reply,
    ScriptedUpstream,
    ToolCallSpec,
    closing,
)


def client(upstream: ScriptedUpstream) -> openai.OpenAI:
    return closing(openai.OpenAI(base_url=upstream.url, api_key="sk-test", max_retries=0))


def test_chat_echo_and_recording(upstream: ScriptedUpstream) -> None:
    answer = client(upstream).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content == "echo: hello"
    assert upstream.last.path == "/v1/chat/completions"
    assert upstream.last.headers["authorization"] == "Bearer sk-test"
    assert upstream.last.json["messages"] == [{"role": "user", "content": "hello"}]


def test_chat_stream_with_tool_calls(upstream: ScriptedUpstream) -> None:
    upstream.script(Reply(text="ok", tool_calls=[ToolCallSpec("grep", '{"q": "needle"}', "c1")]))
    stream = client(upstream).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text, args = "", ""
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for call in delta.tool_calls or []:
            args += call.function.arguments or "" if call.function else ""
    assert (text, args) == ("ok", '{"q": "needle"}')


def test_responses_stream_and_final_object(upstream: ScriptedUpstream) -> None:
    upstream.script(Reply(text="streamed words", reasoning="think"), Reply(text="plain"))
    sdk = client(upstream)
    with sdk.responses.stream(model="m", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "streamed words"
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert sdk.responses.create(model="m", input="hi").output_text == "plain"


def test_failures(upstream: ScriptedUpstream) -> None:
    upstream.script(Fail(500), ContextLengthExceeded(), CutStream(after=2))
    sdk = client(upstream)
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as err:
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert err.value.code == "context_length_exceeded"
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    with pytest.raises(httpx.RemoteProtocolError):
        read_all(f"{upstream.url}/chat/completions", body)


def read_all(url: str, body: dict[str, object]) -> bytes:
    with httpx.stream("POST", url, json=body) as response:
        return b"".join(response.iter_bytes())


def test_models_and_embeddings(upstream: ScriptedUpstream) -> None:
    sdk = client(upstream)
    assert [m.id for m in sdk.models.list()] == list(ScriptedUpstream.MODELS)
    vectors = sdk.embeddings.create(model="e", input=["a", "b"]).data
    assert len(vectors) == 2
    assert vectors[0].embedding != vectors[1].embedding
