"""A scripted OpenAI-compatible upstream on 127.0.0.1: the only fake in memlane's HTTP tests.

The LLM behind the proxy is a real HTTP server (Starlette served by uvicorn in a
background thread) that records every request and answers deterministically.
Everything between the client and it — memlane's proxy, httpx, the `openai` SDK —
is real. The support modules, by concern:

- `tests.support.scripted`: what a reply can be (`Reply`, `Fail`, `Hang`,
  `CutStream`, `Raw`, `ToolCallSpec`) and `RecordedRequest`;
- `tests.support.openai_render`: replies rendered in Chat Completions and Responses,
  whole or streamed, and embeddings;
- this module: the server and its `upstream` fixture;
- `tests.support.running_proxy`: memlane's proxy in front of it (`proxy`,
  `proxy_factory`, `RunningProxy`);
- `tests.support.loopback`: serving an app on a free loopback port in a thread.

Tests import every name they need from here.

`upstream` — a `ScriptedUpstream`, reset for each test (one server per test session):

- `.url`: base URL ending in `/v1` (give it to a client or to `Settings.upstream_url`).
- `.requests`: every `RecordedRequest` received (`.path`, `.method`, `.headers`
  with lower-case names, `.json`, `.body`), in arrival order; `.last` is the latest.
  `.model_requests` keeps only `/chat/completions` and `/responses` calls.
  `.stream_outcomes`: "complete" or "aborted" per streamed answer, once it ended
  (a proxy that cancels the upstream call when its client leaves shows "aborted").
- `.script(*replies)`: queue answers, consumed one per model request in order.
  A reply is a `Reply(text=..., tool_calls=[ToolCallSpec(...)], reasoning=...,
  usage=(prompt, completion))`, or a failure: `Fail(status=500, ...)`,
  `ContextLengthExceeded()`, `Hang(seconds=30)` (no answer until then: a timeout),
  `CutStream(after=2)` (a streamed answer that drops the connection after N events;
  non-streaming requests get a truncated body). Each reply is rendered in the
  wire format (Chat Completions or Responses) and the mode (streaming or not) the
  request asked for, exactly like OpenAI's API.
- `.respond_with(fn)`: `fn(RecordedRequest) -> reply | None`, consulted before
  the queue on every model request (e.g. answer memlane's own summary calls by
  looking at the prompt); None falls through to the queue.
- When neither answers, the reply is an echo: `"echo: <last user text>"`.
- Also served: `GET /v1/models` (`ScriptedUpstream.MODELS`), `POST /v1/embeddings`
  (deterministic unit vectors of `EMBEDDING_DIM` floats from the text's hash).

Note: memlane's own LLM calls (fact extraction, session indexing, summaries) go to the
same upstream, from the proxy's background; a test that asserts on exactly what the
client's requests forwarded turns them off (`proxy_factory(memory_enabled=False,
index_enabled=False)`, as `tests/proxy/conftest.py` does) or scripts them with
`respond_with`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.loopback import Served, serve
from tests.support.openai_render import (
    EMBEDDING_DIM,
    chat_chunks,
    chat_completion,
    embedding,
    final_response,
    last_user_text,
    response_events,
    response_object,
    response_output,
)
from tests.support.running_proxy import ProxyFactory, RunningProxy, closing, start_proxy
from tests.support.scripted import (
    ContextLengthExceeded,
    CutStream,
    Fail,
    Hang,
    Raw,
    RecordedRequest,
    Reply,
    Scripted,
    ToolCallSpec,
)

__all__ = [
    "EMBEDDING_DIM",
    "ContextLengthExceeded",
    "CutStream",
    "Fail",
    "Hang",
    "ProxyFactory",
    "Raw",
    "RecordedRequest",
    "Reply",
    "RunningProxy",
    "Scripted",
    "ScriptedUpstream",
    "ToolCallSpec",
    "chat_chunks",
    "chat_completion",
    "closing",
    "response_events",
    "response_object",
    "response_output",
    "start_proxy",
]


class ScriptedUpstream:
    """An OpenAI-compatible server answering from a script. See the module docstring."""

    MODELS = ("scripted-small", "scripted-large")

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.stream_outcomes: list[str] = []
        """One entry per streamed answer once it ends: complete, or aborted (cut or cancelled)."""
        self._queue: deque[Scripted] = deque()
        self._responder: Callable[[RecordedRequest], Scripted | None] | None = None
        self._lock = threading.Lock()
        self._served: Served | None = None
        self.url = ""

    # -- test-facing API
    def script(self, *replies: Scripted) -> ScriptedUpstream:
        with self._lock:
            self._queue.extend(replies)
        return self

    def respond_with(self, fn: Callable[[RecordedRequest], Scripted | None] | None) -> None:
        self._responder = fn

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.stream_outcomes.clear()
            self._queue.clear()
            self._responder = None

    @property
    def last(self) -> RecordedRequest:
        assert self.requests, "the upstream received no request"
        return self.requests[-1]

    @property
    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith(("/chat/completions", "/responses"))]

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        return len(self._queue)

    # -- lifecycle
    def start(self) -> None:
        config = uvicorn.Config(
            self.app(),
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
            access_log=False,
        )
        self._served = serve(config, name="upstream")
        self.url = f"http://127.0.0.1:{self._served.port}/v1"

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop(timeout=10)

    # -- the ASGI app
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._model_call, methods=["POST"]),
                Route("/v1/responses", self._model_call, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )

    async def _record(self, request: Request) -> RecordedRequest:
        body = await request.body()
        try:
            parsed: Any = json.loads(body) if body else None
        except (ValueError, RecursionError):  # a body too deep to read is recorded as bytes
            parsed = None
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            json=parsed,
        )
        with self._lock:
            self.requests.append(recorded)
        return recorded

    def _next(self, recorded: RecordedRequest) -> Scripted:
        if self._responder is not None:
            chosen = self._responder(recorded)
            if chosen is not None:
                return chosen
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return Reply(text=f"echo: {last_user_text(recorded)}")

    async def _models(self, request: Request) -> Response:
        await self._record(request)
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "memlane-tests"}
            for m in self.MODELS
        ]
        return JSONResponse({"object": "list", "data": data})

    async def _embeddings(self, request: Request) -> Response:
        recorded = await self._record(request)
        body = recorded.json if isinstance(recorded.json, dict) else {}
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": embedding(str(t))}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse(
            {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}
        )

    async def _model_call(self, request: Request) -> Response:
        recorded = await self._record(request)
        body = recorded.json if isinstance(recorded.json, dict) else {}
        model = str(body.get("model") or "scripted-small")
        chat = recorded.path.endswith("/chat/completions")
        stream = body.get("stream") is True
        answer = self._next(recorded)
        if isinstance(answer, Hang):
            await self._hang(answer.seconds)
            answer = Fail(504, "scripted upstream hung", "timeout")
        if isinstance(answer, Reply) and answer.latency:
            await asyncio.sleep(answer.latency)
        if isinstance(answer, Raw):
            if stream:
                frames = list(answer.frames)
                return StreamingResponse(
                    _frames(frames, 0.0, None, self.stream_outcomes),
                    media_type="text/event-stream",
                )
            return Response(json.dumps(answer.body), media_type="application/json")
        if isinstance(answer, Fail):
            if answer.raw_body is not None:
                return Response(answer.raw_body, answer.status, media_type="text/plain")
            error = {"message": answer.message, "type": answer.type, "param": None}
            return JSONResponse({"error": error | {"code": answer.code}}, answer.status)
        cut = answer.after if isinstance(answer, CutStream) else None
        reply = answer.reply if isinstance(answer, CutStream) else answer
        if not stream:
            payload = chat_completion(reply, model) if chat else final_response(reply, model)
            text = json.dumps(payload)
            if cut is not None:
                return _TruncatedResponse(text[: len(text) // 2], len(text))
            return Response(text, media_type="application/json")
        if chat:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            frames = [f"data: {d}\n\n" for d in chat_chunks(reply, model, include_usage=include)]
        else:
            frames = [
                f"event: {name}\ndata: {json.dumps(data)}\n\n"
                for name, data in response_events(reply, model)
            ]
        body = _frames(frames, reply.delay, cut, self.stream_outcomes, reply.linger)
        return StreamingResponse(body, media_type="text/event-stream")

    async def _hang(self, seconds: float) -> None:
        """Sleep in short steps so stopping the server is never held up by a hang."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._served is None or self._served.server.should_exit:
                return
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


class _StreamCut(Exception):
    """Raised inside a streaming body: uvicorn drops the connection mid-response."""


async def _frames(
    frames: list[str], delay: float, cut: int | None, outcomes: list[str], linger: float = 0.0
) -> Any:
    finished = False
    try:
        for index, frame in enumerate(frames):
            if cut is not None and index >= cut:
                raise _StreamCut("scripted cut")
            if delay and index:
                await asyncio.sleep(delay)
            yield frame.encode("utf-8")
        if linger:
            await asyncio.sleep(linger)
        finished = True
    finally:
        outcomes.append("complete" if finished else "aborted")


class _TruncatedResponse(Response):
    """Announces `length` bytes, sends fewer, then closes: a body cut midway."""

    def __init__(self, text: str, length: int) -> None:
        super().__init__(text, media_type="application/json")
        self.headers["content-length"] = str(length)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        raise _StreamCut("scripted cut")


@pytest.fixture(scope="session")
def _upstream_server() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def upstream(_upstream_server: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    _upstream_server.reset()
    yield _upstream_server
    _upstream_server.reset()
