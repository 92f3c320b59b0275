"""The OpenAI-compatible LLM client against an `httpx.MockTransport` we own, and its
stream against the scripted upstream on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from memlane.text.llm import Completion, LLMError, OpenAICompatibleLLM
from tests.support.upstream import CutStream, Fail, Reply, ScriptedUpstream

KEY = "sk-very-secret-key"
Handler = Callable[[httpx.Request], httpx.Response]


def completion_body(text: str | None = "Hello there.", **extra: object) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "small-model-2025",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        **extra,
    }


def client(handler: Handler, *, model: str | None = "small-model") -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        "http://llm.test/v1/",
        api_key=KEY,
        default_model=model,
        timeout=5,
        transport=httpx.MockTransport(handler),
    )


async def test_good_answer_returns_text_and_usage() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion_body())

    result = await client(handler).complete([{"role": "user", "content": "Hi"}])
    assert result == Completion("Hello there.", "small-model-2025", 12, 3)
    request = seen[0]
    assert request.method == "POST"
    assert request.url == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(request.content)
    assert body == {
        "model": "small-model",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.0,
        "stream": False,
    }


async def test_json_mode_model_and_max_tokens_are_sent() -> None:
    bodies: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=completion_body('{"ok": true}'))

    result = await client(handler).complete(
        [{"role": "user", "content": "JSON please"}],
        model="other-model",
        temperature=0.3,
        max_tokens=50,
        json_mode=True,
    )
    assert result.text == '{"ok": true}'
    assert bodies[0]["model"] == "other-model"
    assert bodies[0]["temperature"] == 0.3
    assert bodies[0]["max_tokens"] == 50
    assert bodies[0]["response_format"] == {"type": "json_object"}
    assert "tools" not in bodies[0]


async def test_missing_usage_and_null_content_are_tolerated() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = completion_body(None)
        del body["usage"]
        del body["model"]
        return httpx.Response(200, json=body)

    result = await client(handler).complete([{"role": "user", "content": "Hi"}])
    assert result == Completion("", "small-model", 0, 0)


async def test_no_model_anywhere_is_an_llm_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:  # pragma: no cover - never called
        raise AssertionError("no request expected")

    with pytest.raises(LLMError, match="no model"):
        await client(handler, model=None).complete([{"role": "user", "content": "Hi"}])


async def test_server_error_is_an_llm_error_with_status_and_hint() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": "model overloaded"}})

    with pytest.raises(LLMError, match="HTTP 500: model overloaded"):
        await client(handler).complete([{"role": "user", "content": "Hi"}])


async def test_error_that_echoes_the_key_never_reveals_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key {KEY}"}})

    with pytest.raises(LLMError) as caught:
        await client(handler).complete([{"role": "user", "content": "Hi"}])
    assert "HTTP 401" in str(caught.value)
    assert KEY not in str(caught.value)


async def test_timeout_is_an_llm_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(LLMError, match="timed out"):
        await client(handler).complete([{"role": "user", "content": "Hi"}])


async def test_unreachable_is_an_llm_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(LLMError, match="unreachable") as caught:
        await client(handler).complete([{"role": "user", "content": "Hi"}])
    assert KEY not in str(caught.value)


async def test_body_that_is_not_json_is_an_llm_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>gateway</html>")

    with pytest.raises(LLMError, match="not JSON"):
        await client(handler).complete([{"role": "user", "content": "Hi"}])


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
async def test_body_without_a_message_is_an_llm_error(body: object) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    with pytest.raises(LLMError, match="LLM answered"):
        await client(handler).complete([{"role": "user", "content": "Hi"}])


async def test_real_loopback_connection_refused_is_an_llm_error() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", default_model="m", timeout=2)
    with pytest.raises(LLMError, match="unreachable"):
        await llm.complete([{"role": "user", "content": "Hi"}])


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
    with pytest.raises(LLMError, match="broke off: RemoteProtocolError"):
        await read_all()
    assert len(seen) == 3  # what came before the cut was handed on
