"""A scripted OpenAI-compatible upstream on 127.0.0.1, and a running memlane proxy in front of it.

The only fake in memlane's HTTP tests is the LLM behind the proxy: a real HTTP
server (Starlette served by uvicorn in a background thread) that records every
request and answers deterministically. Everything between the client and it —
memlane's proxy, httpx, the `openai` SDK — is real.

Fixtures (request them by name):

- `upstream` — a `ScriptedUpstream`, reset for each test (one server per test session).
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
- `proxy` — a `RunningProxy`: memlane's app served by uvicorn on 127.0.0.1 (port 0)
  with a temporary home, the hashing embedder and the real tokenizer, forwarding to
  `upstream`. `.url` (`…/v1`), `.base` (no `/v1`), `.runtime`, `.store`, `.settings`,
  `.drain()` waits for its background work; `.call(coro_fn)` runs a coroutine on the
  proxy's event loop (e.g. an engine function that needs the running loop).
- `proxy_factory` — `proxy_factory(**settings)` starts another proxy with settings
  overrides (e.g. `admin_token="t"`, `spec_mode=True`, `upstream_timeout=1.0`), or
  `proxy_factory(runtime=rt)` with your own `Runtime` (a scripted LLM, another store).
  Every proxy it started is stopped at the end of the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

EMBEDDING_DIM = 16
T = TypeVar("T")

# --- what a scripted answer can be ------------------------------------------------


@dataclass(frozen=True)
class ToolCallSpec:
    """A function call the scripted assistant makes."""

    name: str
    arguments: str = "{}"
    id: str = ""


@dataclass(frozen=True)
class Reply:
    """A successful answer: text and/or tool calls, optional reasoning, usage."""

    text: str = ""
    tool_calls: tuple[ToolCallSpec, ...] | list[ToolCallSpec] = ()
    reasoning: str = ""
    usage: tuple[int, int] = (11, 7)
    chunk_size: int = 4
    """Characters per streamed text delta (and per arguments delta)."""
    delay: float = 0.0
    """Seconds to wait between streamed events (to observe unbuffered relaying)."""
    latency: float = 0.0
    """Seconds to wait before answering at all (a model's time to first token)."""


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer with OpenAI's error body (or `raw_body` verbatim)."""

    status: int = 500
    message: str = "scripted upstream failure"
    type: str = "server_error"
    code: str | None = None
    raw_body: str | None = None


def ContextLengthExceeded(message: str = "maximum context length exceeded") -> Fail:
    """The 400 OpenAI returns when a request does not fit the model's window."""
    return Fail(400, message, "invalid_request_error", "context_length_exceeded")


@dataclass(frozen=True)
class Hang:
    """Answer nothing for `seconds` (a client with a shorter timeout sees a timeout)."""

    seconds: float = 30.0


@dataclass(frozen=True)
class CutStream:
    """Start streaming `reply`, then drop the connection after `after` events."""

    after: int = 2
    reply: Reply = field(default_factory=lambda: Reply(text="this answer will be cut short"))


@dataclass(frozen=True)
class Raw:
    """Answer exactly this: a JSON body, or (for a streamed request) these SSE frames verbatim.

    For upstreams that send what memlane does not expect (odd usage, unknown events).
    """

    body: Any = None
    frames: tuple[str, ...] = ()


Scripted = Reply | Fail | Hang | CutStream | Raw


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Chat `messages` or Responses `input` items (a string input becomes one user item)."""
        if not isinstance(self.json, dict):
            return []
        if "messages" in self.json:
            return list(self.json["messages"])
        items = self.json.get("input", [])
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return list(items)


# --- rendering answers in both wire formats --------------------------------------


def _last_user_text(request: RecordedRequest) -> str:
    for item in reversed(request.messages):
        if item.get("role") == "user":
            content = item.get("content", "")
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


class _Counter:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}_{self._n:06d}"


_ids = _Counter()


def _call_id(spec: ToolCallSpec, index: int) -> str:
    return spec.id or f"call_{index}_{hashlib.sha256(spec.name.encode()).hexdigest()[:8]}"


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(c, i),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    prompt, completion = reply.usage
    return {
        "id": _ids.next("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def chat_chunks(reply: Reply, model: str, *, include_usage: bool) -> list[str]:
    """SSE `data:` payloads of a streamed chat completion, `[DONE]` last."""
    cid, created = _ids.next("chatcmpl"), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning, reply.chunk_size)]
    out += [chunk({"content": p}) for p in _pieces(reply.text, reply.chunk_size)]
    for i, c in enumerate(reply.tool_calls):
        head = {"index": i, "id": _call_id(c, i), "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": c.name, "arguments": ""}}]}))
        for p in _pieces(c.arguments, reply.chunk_size):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if include_usage:
        prompt, completion = reply.usage
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        payload = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        out.append(json.dumps(payload))
    out.append("[DONE]")
    return out


def response_output(reply: Reply) -> list[dict[str, Any]]:
    """The `output` items of a Responses answer: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": _ids.next("rs"),
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
                "encrypted_content": "enc:" + hashlib.sha256(reply.reasoning.encode()).hexdigest(),
            }
        )
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": _ids.next("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, c in enumerate(reply.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": _ids.next("fc"),
                "call_id": _call_id(c, i),
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
        )
    return items


def response_object(
    reply: Reply, model: str, *, rid: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    prompt, completion = reply.usage
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def response_events(reply: Reply, model: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of a streamed Responses answer, like OpenAI's."""
    rid = _ids.next("resp")
    events: list[tuple[str, dict[str, Any]]] = []
    seq = 0

    def emit(kind: str, **data: Any) -> None:
        nonlocal seq
        events.append((kind, {"type": kind, "sequence_number": seq, **data}))
        seq += 1

    start = response_object(reply, model, rid=rid, status="in_progress", output=[])
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    output = response_output(reply)
    for index, item in enumerate(output):
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index, item={**item, "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in _pieces(reply.text, reply.chunk_size):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=reply.text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        elif item["type"] == "function_call":
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in _pieces(item["arguments"], reply.chunk_size):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    done = response_object(reply, model, rid=rid, status="completed", output=output)
    emit("response.completed", response=done)
    return events


def _embedding(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(b - 127.5) for b in digest[:EMBEDDING_DIM]]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


# --- the server --------------------------------------------------------------------


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
        self._stopping: asyncio.Event | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
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
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
        # and without it every reused connection waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app(),
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="upstream"
        )
        self._thread.start()
        _wait_started(self._server)
        self.url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout=10)

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
        except ValueError:
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
        return Reply(text=f"echo: {_last_user_text(recorded)}")

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
            {"object": "embedding", "index": i, "embedding": _embedding(str(t))}
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
            payload = chat_completion(reply, model) if chat else _final_response(reply, model)
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
        body = _frames(frames, reply.delay, cut, self.stream_outcomes)
        return StreamingResponse(body, media_type="text/event-stream")

    async def _hang(self, seconds: float) -> None:
        """Sleep in short steps so stopping the server is never held up by a hang."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._server is None or self._server.should_exit:
                return
            await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def _final_response(reply: Reply, model: str) -> dict[str, Any]:
    return response_object(
        reply, model, rid=_ids.next("resp"), status="completed", output=response_output(reply)
    )


class _StreamCut(Exception):
    """Raised inside a streaming body: uvicorn drops the connection mid-response."""


async def _frames(frames: list[str], delay: float, cut: int | None, outcomes: list[str]) -> Any:
    finished = False
    try:
        for index, frame in enumerate(frames):
            if cut is not None and index >= cut:
                raise _StreamCut("scripted cut")
            if delay and index:
                await asyncio.sleep(delay)
            yield frame.encode("utf-8")
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


def _wait_started(server: uvicorn.Server, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.005)


# --- memlane's proxy, running ----------------------------------------------------------


@dataclass
class RunningProxy:
    """memlane's proxy served on loopback in a background thread."""

    url: str
    base: str
    runtime: Any
    settings: Any
    server: uvicorn.Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop

    @property
    def store(self) -> Any:
        return self.runtime.store

    @property
    def admin(self) -> dict[str, str]:
        """The headers memlane's admin API requires (its configured or generated token)."""
        from memlane.files import admin_token

        token = self.settings.admin_token
        value = (
            admin_token.check(token.get_secret_value())
            if token is not None and token.get_secret_value()
            else admin_token.read(self.settings.home_path)
        )
        return {"authorization": f"Bearer {value}"}

    def call(self, fn: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
        """Run `fn()` on the proxy's event loop and return its result."""

        async def run() -> Any:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until the proxy's background work (ingest, indexing…) is done."""

        async def drain() -> None:
            async with asyncio.timeout(timeout):
                await self.runtime.background.drain()

        self.call(drain, timeout + 5)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def start_proxy(settings: Any, runtime: Any = None) -> RunningProxy:
    """Serve memlane's app for `settings` on 127.0.0.1 (a free port) until `.stop()`."""
    from memlane.engine.runtime import Runtime
    from memlane.proxy.app import create_app
    from memlane.store import open_store

    if runtime is None:
        runtime = Runtime(settings, open_store(settings))
    app = create_app(runtime.settings, runtime=runtime)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, access_log=False)
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    def serve() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sockets=[sock]))
        loop.close()

    thread = threading.Thread(target=serve, daemon=True, name="memlane-proxy")
    thread.start()
    _wait_started(server)
    base = f"http://127.0.0.1:{port}"
    return RunningProxy(
        url=f"{base}/v1",
        base=base,
        runtime=runtime,
        settings=runtime.settings,
        server=server,
        thread=thread,
        loop=loops[0],
    )


SDK_CLIENTS: list[Any] = []
"""Clients (`openai.OpenAI`, …) a test made, closed after it."""


def closing(client: T) -> T:
    """`client`, closed when the test ends: a pooled socket left for the garbage collector
    warns (an error under this suite's settings) in whichever later test it is collected."""
    SDK_CLIENTS.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_sdk_clients() -> Iterator[None]:
    yield
    while SDK_CLIENTS:
        SDK_CLIENTS.pop().close()


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


ProxyFactory = Callable[..., RunningProxy]


@pytest.fixture
def proxy_factory(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[ProxyFactory]:
    from memlane.config import Settings

    started: list[RunningProxy] = []

    def make(*, runtime: Any = None, **overrides: Any) -> RunningProxy:
        if runtime is None:
            values: dict[str, Any] = {
                "home": tmp_path / f"home{len(started)}",
                "upstream_url": upstream.url,
                "upstream_timeout": 10.0,
                "embedding_backend": "hashing",
                "recall_deadline_ms": 30_000,  # the deadline has its own test
            }
            values.update(overrides)
            settings = Settings(**values)
            settings.home_path.mkdir(parents=True, exist_ok=True)
            running = start_proxy(settings)
        else:
            running = start_proxy(runtime.settings, runtime)
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()
        with contextlib.suppress(Exception):
            running.runtime.close()


@pytest.fixture
def proxy(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory()
