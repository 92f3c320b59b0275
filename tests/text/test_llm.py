"""The OpenAI-compatible LLM client against an `httpx.MockTransport` we own, and its
stream against the scripted upstream on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import httpx
import pytest

from memlane.text.llm import (
    REQUEST_KEY,
    ClientPool,
    Completion,
    LentKey,
    LLMError,
    OpenAICompatibleLLM,
)
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


class _CountingServer:
    """A real HTTP/1.1 server on loopback that counts the connections it accepts and
    answers every request with one completion, keeping the connection open."""

    def __init__(self) -> None:
        self.connections = 0
        self.authorizations: list[str] = []
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        body = json.dumps(completion_body()).encode()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                headers = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(headers.get("content-length", "0")))
                self.authorizations.append(headers.get("authorization", ""))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self.server.wait_closed()


async def test_a_client_pool_reuses_one_connection_and_still_sends_each_calls_key() -> None:
    server = _CountingServer()
    url = await server.start()
    pool = ClientPool(timeout=5)
    try:
        pooled = OpenAICompatibleLLM(url, api_key=KEY, default_model="m", clients=pool)
        for _ in range(3):
            await pooled.complete([{"role": "user", "content": "Hi"}])
        assert server.connections == 1
        borrowing = OpenAICompatibleLLM(
            url, default_model="m", borrow_request_key=True, clients=pool
        )
        token = REQUEST_KEY.set(LentKey("openai", {"authorization": "Bearer sk-client-key"}))
        try:
            await borrowing.complete([{"role": "user", "content": "Hi"}])
        finally:
            REQUEST_KEY.reset(token)
        await borrowing.complete([{"role": "user", "content": "Hi"}])  # no key to borrow now
        assert server.connections == 1
        assert server.authorizations == [f"Bearer {KEY}"] * 3 + ["Bearer sk-client-key", ""]
        single = OpenAICompatibleLLM(url, api_key=KEY, default_model="m")
        for _ in range(2):
            await single.complete([{"role": "user", "content": "Hi"}])
        assert server.connections == 3  # without a pool, each call opens its own
    finally:
        await pool.aclose()
        await server.stop()


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
