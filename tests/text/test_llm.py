"""The OpenAI-compatible LLM client against the scripted upstream on loopback: what it
sends, what it makes of each answer, and each failure as an `LLMError`."""

from __future__ import annotations

import json
import socket

import pytest

from memlane.text.llm import OWN_CALL_HEADER, Completion, LLMError, OpenAICompatibleLLM
from tests.support.upstream import CutStream, Fail, Hang, Raw, Reply, ScriptedUpstream

KEY = "sk-very-secret-key"
HI = [{"role": "user", "content": "Hi"}]


def completion_body(text: str | None = "Hello there.", **extra: object) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "small-model-2025",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        **extra,
    }


def client(
    upstream: ScriptedUpstream, *, model: str | None = "small-model", timeout: float = 5
) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        upstream.url + "/", api_key=KEY, default_model=model, timeout=timeout
    )


async def test_good_answer_returns_text_and_usage(upstream: ScriptedUpstream) -> None:
    upstream.script(Raw(body=completion_body()))
    said = [{"role": "user", "content": "Hi, café ☕"}]
    result = await client(upstream).complete(said)
    assert result == Completion("Hello there.", "small-model-2025", 12, 3)
    (request,) = upstream.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers[OWN_CALL_HEADER] == "1"
    assert request.headers["content-type"] == "application/json"
    assert request.json == {
        "model": "small-model",
        "messages": said,
        "temperature": 0.0,
        "stream": False,
    }
    assert "café ☕".encode() in request.body  # UTF-8 as it is, not \\u-escaped


async def test_json_mode_model_and_max_tokens_are_sent(upstream: ScriptedUpstream) -> None:
    upstream.script(Raw(body=completion_body('{"ok": true}')))
    result = await client(upstream).complete(
        [{"role": "user", "content": "JSON please"}],
        model="other-model",
        temperature=0.3,
        max_tokens=50,
        json_mode=True,
    )
    assert result.text == '{"ok": true}'
    sent = upstream.last.json
    assert sent["model"] == "other-model"
    assert sent["temperature"] == 0.3
    assert sent["max_tokens"] == 50
    assert sent["response_format"] == {"type": "json_object"}
    assert "tools" not in sent


async def test_missing_usage_and_null_content_are_tolerated(upstream: ScriptedUpstream) -> None:
    body = completion_body(None)
    del body["usage"]
    del body["model"]
    upstream.script(Raw(body=body))
    result = await client(upstream).complete(HI)
    assert result == Completion("", "small-model", 0, 0)


async def test_a_completion_served_as_another_content_type_is_still_read(
    upstream: ScriptedUpstream,
) -> None:
    upstream.script(Fail(200, raw_body=json.dumps(completion_body("plain"))))  # text/plain
    assert (await client(upstream).complete(HI)).text == "plain"


async def test_no_model_anywhere_is_an_llm_error(upstream: ScriptedUpstream) -> None:
    with pytest.raises(LLMError, match="no model"):
        await client(upstream, model=None).complete(HI)
    assert upstream.requests == []


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_an_error_answer_is_an_llm_error_with_status_and_hint_and_no_retry(
    upstream: ScriptedUpstream, status: int
) -> None:
    upstream.script(Fail(status, "model overloaded"), Reply(text="a second try"))
    with pytest.raises(LLMError, match=f"HTTP {status}: model overloaded") as caught:
        await client(upstream).complete(HI)
    assert caught.value.status == status
    assert not caught.value.refused
    assert len(upstream.requests) == 1  # the caller takes its fallback: no second call


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refusal_that_echoes_the_key_never_reveals_it(
    upstream: ScriptedUpstream, status: int
) -> None:
    upstream.script(Fail(status, f"Incorrect API key {KEY}"))
    with pytest.raises(LLMError) as caught:
        await client(upstream).complete(HI)
    assert caught.value.refused
    assert f"HTTP {status}: Incorrect API key ***" in str(caught.value)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("status", [502, 307])  # a redirect is no answer either
async def test_an_error_answer_that_is_not_json_has_no_hint(
    upstream: ScriptedUpstream, status: int
) -> None:
    upstream.script(Fail(status, raw_body="<html>bad gateway</html>"))
    with pytest.raises(LLMError) as caught:
        await client(upstream).complete(HI)
    assert str(caught.value) == f"LLM answered HTTP {status}"


async def test_an_upstream_silent_past_the_timeout_is_an_llm_error(
    upstream: ScriptedUpstream,
) -> None:
    upstream.script(Hang(seconds=5))
    with pytest.raises(LLMError, match=r"timed out after 0.3s") as caught:
        await client(upstream, timeout=0.3).complete(HI)
    assert caught.value.status is None


async def test_an_answer_cut_midway_is_an_llm_error(upstream: ScriptedUpstream) -> None:
    upstream.script(CutStream())  # a non-streamed answer: half its announced body, then closed
    with pytest.raises(LLMError, match="broke off: ClientPayloadError"):
        await client(upstream).complete(HI)


async def test_a_refused_connection_is_an_llm_error_without_the_key() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", api_key=KEY, default_model="m")
    with pytest.raises(LLMError, match=r"unreachable at http://127\.0\.0\.1") as caught:
        await llm.complete(HI)
    assert KEY not in str(caught.value)


async def test_body_that_is_not_json_is_an_llm_error(upstream: ScriptedUpstream) -> None:
    upstream.script(Fail(200, raw_body="<html>gateway</html>"))
    with pytest.raises(LLMError, match="not JSON"):
        await client(upstream).complete(HI)


@pytest.mark.parametrize(
    "body",
    [
        {"object": "chat.completion"},
        {"choices": []},
        {"choices": [{"index": 0}]},
        {"choices": [{"message": {"content": ["not", "text"]}}]},
        ["not", "an", "object"],
    ],
)
async def test_body_without_a_message_is_an_llm_error(
    upstream: ScriptedUpstream, body: object
) -> None:
    upstream.script(Raw(body=body))
    with pytest.raises(LLMError, match="LLM answered"):
        await client(upstream).complete(HI)


async def test_stream_yields_the_upstreams_events_as_they_come(upstream: ScriptedUpstream) -> None:
    from memlane.proxy.wire.chat import ChatAssembler

    upstream.script(Reply(text="streamed answer", reasoning="thinking", usage=(9, 4)))
    llm = OpenAICompatibleLLM(upstream.url, api_key=KEY, timeout=10)
    assembler = ChatAssembler()
    events = 0
    async for event, data in llm.stream([{"role": "user", "content": "Hi"}], model="m"):
        assembler.feed(event, data)
        events += 1
    assert events > 4  # one per chunk, not one per answer
    (message,) = assembler.answer().messages
    assert (message.text, message.raw) == (
        "streamed answer",
        {"role": "assistant", "content": "streamed answer", "reasoning_content": "thinking"},
    )
    assert (assembler.prompt_tokens, assembler.completion_tokens) == (9, 4)
    sent = upstream.last
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_stream_failures_are_llm_errors(upstream: ScriptedUpstream) -> None:
    llm = OpenAICompatibleLLM(upstream.url, timeout=10)
    upstream.script(Fail(429, "slow down"), CutStream(after=3))
    seen: list[str] = []

    async def read_all() -> None:
        async for _, data in llm.stream([{"role": "user", "content": "Hi"}], model="m"):
            seen.append(data)

    with pytest.raises(LLMError, match="HTTP 429: slow down"):
        await read_all()
    assert seen == []
    with pytest.raises(LLMError, match="broke off: ClientPayloadError"):
        await read_all()
    assert len(seen) == 3  # what came before the cut was handed on


async def test_calls_go_through_the_proxy_the_environment_names(
    upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", upstream.url.removesuffix("/v1"))  # it answers as a proxy
    llm = OpenAICompatibleLLM("http://llm.invalid/v1", api_key=KEY, default_model="m")
    upstream.script(Reply(text="through the proxy"))
    assert (await llm.complete(HI)).text == "through the proxy"
    assert upstream.last.headers["host"] == "llm.invalid"
