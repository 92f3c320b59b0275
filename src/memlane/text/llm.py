"""memlane's own calls to an OpenAI-compatible LLM (summaries, facts, metadata), and
the streamed conversation of `memlane chat`.

memlane's own calls never carry tools and never stream: one prompt in, one text out
(`complete`). `stream` yields a streamed completion's server-sent events as they
come, for a face to assemble with its wire format. Every failure (unreachable,
timeout, non-2xx, a body that is not a completion) becomes `LLMError` with a short
reason, so each caller can take its documented fallback. The API key is only ever
sent as a header, never put in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, Unpack

import httpx

from memlane.text import secret_detectors
from memlane.text.redact import redact, redact_message
from memlane.text.sse import SSEDecoder
from memlane.text.tls import ssl_context

OWN_CALL_HEADER = "x-memlane-own-call"
"""Sent with every call memlane makes to an LLM for itself (facts, summaries, session
metadata, session questions): a memlane proxy that receives it refuses it (HTTP 508), so a
configuration that points memlane's own calls at a memlane can never loop."""


class LLMError(Exception):
    """The LLM could not be reached or refused: the caller falls back, it never crashes."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status the LLM answered with, when it answered."""

    @property
    def refused(self) -> bool:
        """The server would not take the call's credentials (no key, or the wrong one)."""
        return self.status in (401, 403)


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class CallOptions(TypedDict, total=False):
    """How one of memlane's own calls asks (`LLM.complete`); a field left out takes the
    default it names."""

    model: str | None
    """The model (default: the client's own)."""
    temperature: float
    """Default 0.0: the same prompt gets the same answer, as near as the model allows."""
    max_tokens: int | None
    """The most the answer may take (default: the API's own limit)."""
    json_mode: bool
    """Ask for a JSON object as the answer (default False)."""


class LLM(Protocol):
    async def complete(
        self, messages: Sequence[Mapping[str, Any]], **options: Unpack[CallOptions]
    ) -> Completion:
        """One chat completion with no tools. Raises `LLMError` on any failure."""
        ...


Provider = Literal["openai", "anthropic"]
"""The API an LLM speaks: OpenAI-compatible chat completions, or Anthropic Messages."""


@dataclass(frozen=True, slots=True)
class LentKey:
    """The credential of the client request whose work is running, and the kind of upstream
    it was sent to: memlane's own call borrows it only to talk to that same upstream."""

    provider: Provider
    headers: Mapping[str, str] = field(repr=False)
    """The credential headers as the client sent them (`authorization`, `x-api-key`)."""


REQUEST_KEY: contextvars.ContextVar[LentKey | None] = contextvars.ContextVar(
    "memlane_request_key", default=None
)
"""The key of the client request whose work is running (set by the proxy per request;
background work started by it inherits it, other work never sees it). Held in memory
only: never stored, never logged."""


@dataclass(frozen=True, slots=True)
class LLMRoute:
    """Where a client request went: the API it spoke and the upstream it was forwarded to.
    memlane's own calls for the work it caused go the same way (`text.llm_route`). It
    holds no credential, so it may be kept with queued work; the credential travels
    beside it in memory only (`REQUEST_KEY`)."""

    provider: Provider
    base_url: str


REQUEST_ROUTE: contextvars.ContextVar[LLMRoute | None] = contextvars.ContextVar(
    "memlane_request_route", default=None
)
"""The route of the client request whose work is running (set by the proxy per request,
inherited by the background work it starts, like `REQUEST_KEY`)."""


class ClientPool:
    """Open `httpx.AsyncClient`s for memlane's own LLM calls, one per event loop.

    A long-running process (the proxy) makes several calls per turn (facts,
    reconciliation, summaries, session metadata). Opening a client per call costs
    event-loop time the requests share (a client, a connection, a TLS handshake
    each time); a pool keeps one client per loop, its connections reused. Whoever
    makes a pool closes it (`aclose`, from the loop that used it) when done.
    """

    def __init__(self, timeout: float, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._timeout = timeout
        self._transport = transport
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]
        self._clients = weakref.WeakKeyDictionary()

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None or found.is_closed:
            found = self._clients[loop] = httpx.AsyncClient(
                timeout=self._timeout, transport=self._transport, verify=ssl_context()
            )
        return found

    async def aclose(self) -> None:
        """Close the running loop's client (the others' loops are gone with their sockets)."""
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.aclose()


class HTTPLLM(ABC):
    """What memlane's HTTP LLM clients share: the pool or a client per call, the key
    (its own, or the one the request lent), and failures as `LLMError`.

    Without a `ClientPool`, each call opens its own `httpx.AsyncClient`: a client
    bound to no event loop can be built at start-up and used from a CLI's
    `asyncio.run` or a test's loop alike. The proxy passes a pool it closes at
    shutdown, so its calls reuse one client and its connections.
    """

    provider: Provider = "openai"
    path = "/chat/completions"

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        default_model: str | None = None,
        timeout: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
        borrow_request_key: bool = False,
        clients: ClientPool | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_model = default_model
        self.borrow_request_key = borrow_request_key
        """Use the key of the request that caused the call before `api_key` (then the
        fallback): only for a client that talks to the server the request went to (the
        factory decides)."""
        self._api_key = api_key
        self._headers = self._key_headers(api_key) if api_key else {}
        self._timeout = timeout
        self._transport = transport
        self._clients = clients

    def _key_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _model(self, model: str | None) -> str:
        chosen = model or self.default_model
        if not chosen:
            raise LLMError("no model: set llm_model (or summary_model) or name one per call")
        return chosen

    @property
    def _url(self) -> str:
        return self.base_url + self.path

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx.AsyncClient]:
        """The pool's open client, or one for this call alone (closed after it)."""
        if self._clients is not None:
            yield self._clients.client()
            return
        async with httpx.AsyncClient(
            timeout=self._timeout, transport=self._transport, verify=ssl_context()
        ) as client:
            yield client

    def _borrowed(self) -> dict[str, str]:
        """The credential headers of the request whose work this is, when they may be used:
        lent for this kind of upstream, and ASCII (a key is)."""
        lent = REQUEST_KEY.get() if self.borrow_request_key else None
        if lent is None or lent.provider != self.provider:
            return {}
        return {k: v for k, v in lent.headers.items() if v and v.isascii()}

    def _call_headers(self) -> dict[str, str]:
        """This call's key: our own, or the one borrowed from the request that caused it."""
        return self._borrowed() or dict(self._headers)

    def _transport_error(self, exc: httpx.HTTPError) -> LLMError:
        if isinstance(exc, httpx.TimeoutException):
            return LLMError(f"LLM timed out after {self._timeout:g}s ({self.base_url})")
        return LLMError(
            f"LLM unreachable at {self.base_url}, or it broke off: {type(exc).__name__}"
        )

    def _refused(self, response: httpx.Response) -> LLMError:
        keys = [v.partition(" ")[2].strip() or v for v in self._borrowed().values()]
        hint = _error_hint(response, [*keys, self._api_key])  # an upstream may echo the key
        return LLMError(
            f"LLM answered HTTP {response.status_code}{hint}", status=response.status_code
        )

    async def _post(self, body: Mapping[str, Any]) -> Any:
        try:
            async with self._client() as client:
                response = await client.post(
                    self._url,
                    json=body,
                    headers={**self._call_headers(), OWN_CALL_HEADER: "1"},
                    timeout=self._timeout,
                )
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc
        if not response.is_success:
            raise self._refused(response)
        try:
            return response.json()
        except ValueError as exc:
            raise LLMError("LLM answered a body that is not JSON") from exc

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], **options: Unpack[CallOptions]
    ) -> Completion:
        """The `LLM` call: a chat-shaped body, shaped for this client's API, and its answer."""
        chosen = self._model(options.get("model"))
        body: dict[str, Any] = {
            "model": chosen,
            "messages": await redacted(messages),
            "temperature": options.get("temperature", 0.0),
        }
        max_tokens = options.get("max_tokens")
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        shaped = self._shaped(body, options.get("json_mode", False))
        return self._read(await self._post(shaped), chosen)

    @abstractmethod
    def _shaped(self, body: dict[str, Any], json_mode: bool) -> dict[str, Any]:
        """The chat-shaped `body` as this API takes it."""

    @abstractmethod
    def _read(self, payload: Any, requested_model: str) -> Completion:
        """The answer in this API's response body; `LLMError` when there is none."""


class OpenAICompatibleLLM(HTTPLLM):
    """`POST {base_url}/chat/completions` with httpx."""

    def _shaped(self, body: dict[str, Any], json_mode: bool) -> dict[str, Any]:
        shaped = {**body, "stream": False}
        if json_mode:
            shaped["response_format"] = {"type": "json_object"}
        return shaped

    def _read(self, payload: Any, requested_model: str) -> Completion:
        return _parse_completion(payload, requested_model)

    async def stream(
        self, messages: Sequence[Mapping[str, Any]], *, model: str | None = None
    ) -> AsyncIterator[tuple[str | None, str]]:
        """A streamed chat completion (usage included): its (event, data) pairs as they come.

        Raises `LLMError` when the call fails, before the first event or midway.
        """
        body = {
            "model": self._model(model),
            "messages": [dict(m) for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        decoder = SSEDecoder()
        try:
            async with (
                self._client() as client,
                client.stream(
                    "POST",
                    self._url,
                    json=body,
                    headers=self._call_headers(),
                    timeout=self._timeout,
                ) as response,
            ):
                if not response.is_success:
                    await response.aread()
                    raise self._refused(response)
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        yield event
            for event in decoder.close():
                yield event
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc


INLINE_REDACTION_CHARS = 2_048
"""Above this much text, redaction (0.4–0.6 ms per KB, `benchmarks/redaction.py`) runs in
a worker thread, so the event loop goes on serving requests meanwhile; so does the first
redaction of a process, which loads the detectors."""


async def redacted(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every credential redacted: every text memlane sends to its own LLM
    calls (facts, summaries, session metadata, session questions) passes here."""
    size = sum(len(str(m.get("content") or "")) for m in messages)
    if size <= INLINE_REDACTION_CHARS and secret_detectors.loaded():
        return [redact_message(m) for m in messages]
    return await asyncio.to_thread(lambda: [redact_message(m) for m in messages])


def _parse_completion(payload: Any, requested_model: str) -> Completion:
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError("LLM answered without a message (no choices[0].message)") from exc
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise LLMError("LLM answered a message whose content is not text")
    return answered(payload, text, requested_model, prompt=("prompt_tokens",))


def answered(
    payload: Any,
    text: str,
    requested_model: str,
    *,
    prompt: Sequence[str],
    output: str = "completion_tokens",
) -> Completion:
    """The `Completion` of an answer whose text was read: the model it names (else the one
    asked for) and its usage, the `prompt` counters summed (each API names its own)."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        text=text,
        model=str(payload.get("model") or requested_model),
        prompt_tokens=sum(_count(usage.get(name)) for name in prompt),
        completion_tokens=_count(usage.get(output)),
    )


def _count(value: Any) -> int:
    """A token count an upstream reported, or 0 for anything that is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _error_hint(response: httpx.Response, keys: Sequence[str | None]) -> str:
    """The upstream's own error message, short, with the keys masked if one was echoed."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        return ""
    if not isinstance(message, str) or not message:
        return ""
    for key in keys:
        if key:
            message = message.replace(key, "***")
    return ": " + redact(message)[:200]
