"""A scripted Anthropic-compatible upstream on 127.0.0.1, like the OpenAI one beside it.

The same server machinery and script as `tests.support.upstream` (replies queued
with `.script(...)`, `.respond_with(fn)`, every request recorded), answering in
Anthropic Messages: `POST /v1/messages` (a `message`, or its event stream) and
`POST /v1/messages/count_tokens`.

- A `Reply` renders as content blocks: a `thinking` block (its text, and a
  signature derived from it) when `reasoning` is set, a `text` block, one
  `tool_use` block per tool call (`arguments` is its JSON input). A `Turn` (a
  `Reply` with Anthropic extras) adds a `redacted_thinking` block and cache usage
  (`cache_read`, `cache_creation`).
- Streams are Anthropic's events: `message_start`, `ping`, per block
  `content_block_start` / `_delta` (`text_delta`, `thinking_delta` +
  `signature_delta`, `input_json_delta`, `chunk_size` characters each) /
  `_stop`, `message_delta` (stop reason, output usage), `message_stop`.
- `Fail` answers with Anthropic's error object; `ContextLengthExceeded()` is
  the 400 "prompt is too long" the API gives; `Hang`, `CutStream`, `Raw` behave
  as for the OpenAI upstream.
- `.count_route = False` makes count_tokens answer 404 (an upstream without it).

Fixtures: `anthropic_upstream` (reset per test; `.base` is its base URL, no
`/v1`, for `anthropic_upstream_url` and the SDK's `base_url`), and
`anthropic_proxy` (`anthropic_proxy(**settings)`: a memlane proxy forwarding
`/v1/messages` there, memory and indexing off unless given). `anthropic_sdk(proxy,
**headers)` is the official SDK pointed at a proxy; it is closed after the test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.openai_render import _ids, _pieces
from tests.support.running_proxy import ProxyFactory, RunningProxy
from tests.support.scripted import CutStream, Fail, Hang, Raw, RecordedRequest, Reply
from tests.support.upstream import ScriptedUpstream, _frames, _TruncatedResponse

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Turn(Reply):
    """A `Reply` with what only Anthropic answers carry."""

    redacted: str = ""
    """Data of a `redacted_thinking` block placed first."""
    cache_read: int = 0
    cache_creation: int = 0


def ContextLengthExceeded(tokens: int = 250_000, limit: int = 200_000) -> Fail:
    """The 400 Anthropic returns for a prompt over the model's window."""
    return Fail(400, f"prompt is too long: {tokens} tokens > {limit} maximum", "invalid_request")


def signature(thinking: str) -> str:
    """The signature the scripted upstream gives a thinking block (checkable by tests)."""
    return "sig-" + hashlib.sha256(thinking.encode("utf-8")).hexdigest()


def blocks(reply: Reply) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(reply, Turn) and reply.redacted:
        out.append({"type": "redacted_thinking", "data": reply.redacted})
    if reply.reasoning:
        out.append(
            {
                "type": "thinking",
                "thinking": reply.reasoning,
                "signature": signature(reply.reasoning),
            }
        )
    if reply.text:
        out.append({"type": "text", "text": reply.text})
    for index, call in enumerate(reply.tool_calls):
        call_id = call.id or f"toolu_{index}_{hashlib.sha256(call.name.encode()).hexdigest()[:8]}"
        out.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": call.name,
                "input": json.loads(call.arguments),
            }
        )
    return out


def usage(reply: Reply, *, output: int | None = None) -> dict[str, int]:
    prompt, completion = reply.usage
    turn = reply if isinstance(reply, Turn) else Turn()
    return {
        "input_tokens": prompt,
        "cache_creation_input_tokens": turn.cache_creation,
        "cache_read_input_tokens": turn.cache_read,
        "output_tokens": completion if output is None else output,
    }


def message(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": _ids.next("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks(reply),
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": usage(reply),
    }


def events(reply: Reply, model: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of a streamed answer, like Anthropic's."""
    start = {**message(reply, model), "content": [], "stop_reason": None}
    start["usage"] = usage(reply, output=1)
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start}), ("ping", {})]
    for index, block in enumerate(blocks(reply)):
        kind = block["type"]
        empty = {
            "text": {"type": "text", "text": ""},
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "tool_use": {**block, "input": {}},
        }.get(kind, block)
        out.append(("content_block_start", {"index": index, "content_block": empty}))
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            deltas = [
                {"type": "text_delta", "text": p} for p in _pieces(block["text"], reply.chunk_size)
            ]
        elif kind == "thinking":
            deltas = [
                {"type": "thinking_delta", "thinking": p}
                for p in _pieces(block["thinking"], reply.chunk_size)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            text = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(text, reply.chunk_size)
            ]
        out += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        out.append(("content_block_stop", {"index": index}))
    stop = "tool_use" if reply.tool_calls else "end_turn"
    out.append(
        (
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": reply.usage[1]},
            },
        )
    )
    out.append(("message_stop", {}))
    return out


def frames(pairs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in pairs
    ]


class ScriptedAnthropic(ScriptedUpstream):
    """An Anthropic-compatible server answering from a script. See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.count_route = True
        self.queries: list[str] = []
        """The query string of each request, in arrival order."""

    @property
    def base(self) -> str:
        return self.url.removesuffix("/v1")

    @property
    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/messages"]

    def reset(self) -> None:
        super().reset()
        self.count_route = True
        self.queries = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
            ]
        )

    async def _count(self, request: Request) -> Response:
        recorded = await self._record(request)
        self.queries.append(request.url.query)
        if not self.count_route:
            return JSONResponse(
                {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}}, 404
            )
        body = recorded.json if isinstance(recorded.json, dict) else {}
        return JSONResponse({"input_tokens": 1000 + len(json.dumps(body.get("messages", [])))})

    async def _messages(self, request: Request) -> Response:
        recorded = await self._record(request)
        self.queries.append(request.url.query)
        body = recorded.json if isinstance(recorded.json, dict) else {}
        model = str(body.get("model") or "claude-scripted")
        stream = body.get("stream") is True
        answer = self._next(recorded)
        if isinstance(answer, Hang):
            await self._hang(answer.seconds)
            answer = Fail(504, "scripted upstream hung", "timeout_error")
        if isinstance(answer, Reply) and answer.latency:
            await asyncio.sleep(answer.latency)
        if isinstance(answer, Raw):
            if stream:
                body_iter = _frames(list(answer.frames), 0.0, None, self.stream_outcomes)
                return StreamingResponse(body_iter, media_type="text/event-stream")
            return Response(json.dumps(answer.body), media_type="application/json")
        if isinstance(answer, Fail):
            if answer.raw_body is not None:
                return Response(answer.raw_body, answer.status, media_type="text/plain")
            kind = ERROR_TYPES.get(answer.status, "api_error")
            error = {"type": "error", "error": {"type": kind, "message": answer.message}}
            return JSONResponse(error, answer.status)
        cut = answer.after if isinstance(answer, CutStream) else None
        reply = answer.reply if isinstance(answer, CutStream) else answer
        if not stream:
            text = json.dumps(message(reply, model))
            if cut is not None:
                return _TruncatedResponse(text[: len(text) // 2], len(text))
            return Response(text, media_type="application/json")
        body_iter = _frames(
            frames(events(reply, model)), reply.delay, cut, self.stream_outcomes, reply.linger
        )
        return StreamingResponse(body_iter, media_type="text/event-stream")


@pytest.fixture(scope="session")
def _anthropic_server() -> Iterator[ScriptedAnthropic]:
    server = ScriptedAnthropic()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def anthropic_upstream(_anthropic_server: ScriptedAnthropic) -> Iterator[ScriptedAnthropic]:
    _anthropic_server.reset()
    yield _anthropic_server
    _anthropic_server.reset()


AnthropicProxy = ProxyFactory


@pytest.fixture
def anthropic_proxy(
    proxy_factory: ProxyFactory, anthropic_upstream: ScriptedAnthropic
) -> AnthropicProxy:
    def make(**overrides: Any) -> RunningProxy:
        values: dict[str, Any] = {
            "anthropic_upstream_url": anthropic_upstream.base,
            "memory_enabled": False,
            "index_enabled": False,
        }
        values.update(overrides)
        return proxy_factory(**values)

    return make


_OPEN_SDKS: list[anthropic.Anthropic] = []


def anthropic_sdk(
    proxy: RunningProxy, api_key: str = "sk-ant-x", **headers: str
) -> anthropic.Anthropic:
    """The official `anthropic` client for `proxy`, no retries, with `headers` on every call."""
    client = anthropic.Anthropic(
        base_url=proxy.base, api_key=api_key, max_retries=0, default_headers=headers
    )
    _OPEN_SDKS.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_anthropic_sdks() -> Iterator[None]:
    """Clients a test made are closed with it (an open pool warns when collected)."""
    yield
    while _OPEN_SDKS:
        _OPEN_SDKS.pop().close()
