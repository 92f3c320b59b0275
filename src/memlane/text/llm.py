"""memlane's own calls to an OpenAI-compatible LLM (summaries, facts, metadata), and
the streamed conversation of `memlane chat`.

memlane's own calls never carry tools and never stream: one prompt in, one text out
(`complete`). `stream` yields a streamed completion's server-sent events as they
come, for a face to assemble with its wire format. Every failure (unreachable,
timeout, non-2xx, a body that is not a completion) becomes `LLMError` with a short
reason, so each caller can take its documented fallback. The API key is only ever
sent as a header, never put in a message. The calls go through aiohttp
(`text.http_session`): a long-running process keeps one session per event loop
(`ClientPool`), others open one per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack

from memlane.text import secret_detectors
from memlane.text.http_session import env_proxy, once_more_if_broken, open_session
from memlane.text.redact import redact, redact_message
from memlane.text.sse import SSEDecoder

if TYPE_CHECKING:
    import aiohttp

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
    """Open aiohttp sessions for memlane's own LLM calls, one per event loop (made there on
    first use: a session belongs to the loop it was made on).

    A long-running process (the proxy) makes several calls per turn (facts,
    reconciliation, summaries, session metadata). Opening a session per call costs
    event-loop time the requests share (a session, a connection, a TLS handshake
    each time); a pool keeps one session per loop, its connections reused. Whoever
    makes a pool closes it (`aclose`, from each loop that used it) when done: the
    runtime's is closed at the proxy's shutdown.
    """

    def __init__(self) -> None:
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def session(self) -> aiohttp.ClientSession:
        """The running loop's session, opened on first use (or again after `aclose`)."""
        loop = asyncio.get_running_loop()
        found = self._sessions.get(loop)
        if found is None or found.closed:
            found = self._sessions[loop] = open_session()
        return found

    async def aclose(self) -> None:
        """Close the running loop's session (one per loop: each loop closes its own)."""
        found = self._sessions.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.close()


def failures() -> tuple[type[BaseException], ...]:
    """What aiohttp raises when the LLM is down, cuts the connection or goes silent.
    aiohttp is imported when a call is made (`http_session.open_session`), not with this
    module: a CLI command that makes no call does not load it."""
    import aiohttp

    return (aiohttp.ClientError, TimeoutError, OSError)


class HTTPLLM(ABC):
    """What memlane's HTTP LLM clients share: the pool or a session per call, the key
    (its own, or the one the request lent), and failures as `LLMError`.

    Without a `ClientPool`, each call opens its own aiohttp session and closes it: a
    client bound to no event loop can be built at start-up and used from a CLI's
    `asyncio.run` or a test's loop alike. The proxy passes the runtime's pool, closed
    at shutdown, so its calls reuse one session per loop and its connections.
    """

    provider: Provider = "openai"
    path = "/chat/completions"

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        default_model: str | None = None,
        timeout: float = 120.0,
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
        self._proxy = env_proxy(self.base_url)
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

    @functools.cached_property
    def _limits(self) -> aiohttp.ClientTimeout:
        """Like a read or connect limit, not a total: a long answer that keeps coming is
        never cut (a free connection is waited for within `connect`)."""
        import aiohttp

        return aiohttp.ClientTimeout(connect=self._timeout, sock_read=self._timeout)

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[aiohttp.ClientSession]:
        """The pool's open session, or one for this call alone (closed after it)."""
        if self._clients is not None:
            yield self._clients.session()
            return
        async with open_session() as session:
            yield session

    @contextlib.asynccontextmanager
    async def _sent(
        self, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The answer to `body` POSTed to the API, its headers read; sent once more when its
        connection broke first (`once_more_if_broken`). A redirect is not followed (the key
        would go with it): it is an answer like any other."""
        async with self._session() as session:

            def once() -> Awaitable[aiohttp.ClientResponse]:
                return session.post(
                    self._url,
                    data=_encoded(body),
                    headers={**headers, "content-type": "application/json"},
                    timeout=self._limits,
                    proxy=self._proxy,
                    allow_redirects=False,
                )

            async with await once_more_if_broken(once) as response:
                yield response

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

    def _transport_error(self, exc: BaseException) -> LLMError:
        if isinstance(exc, TimeoutError):
            return LLMError(f"LLM timed out after {self._timeout:g}s ({self.base_url})")
        return LLMError(
            f"LLM unreachable at {self.base_url}, or it broke off: {type(exc).__name__}"
        )

    def _refused(self, status: int, body: bytes) -> LLMError:
        keys = [v.partition(" ")[2].strip() or v for v in self._borrowed().values()]
        hint = _error_hint(body, [*keys, self._api_key])  # an upstream may echo the key
        return LLMError(f"LLM answered HTTP {status}{hint}", status=status)

    async def _post(self, body: Mapping[str, Any]) -> Any:
        try:
            async with self._sent(body, {**self._call_headers(), OWN_CALL_HEADER: "1"}) as answer:
                status, content = answer.status, await answer.read()
        except failures() as exc:
            raise self._transport_error(exc) from exc
        if not _success(status):
            raise self._refused(status, content)
        try:
            return json.loads(content)
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
    """`POST {base_url}/chat/completions`."""

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
            async with self._sent(body, self._call_headers()) as response:
                if not _success(response.status):
                    raise self._refused(response.status, await response.read())
                while chunk := await response.content.readany():
                    for event in decoder.feed(chunk):
                        yield event
            for event in decoder.close():
                yield event
        except failures() as exc:
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


def _encoded(body: Mapping[str, Any]) -> bytes:
    """`body` as compact JSON in UTF-8 (text in any script as it is, not escaped)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _success(status: int) -> bool:
    """A 2xx: a redirect is no answer either."""
    return 200 <= status < 300


def _error_hint(body: bytes, keys: Sequence[str | None]) -> str:
    """The upstream's own error message, short, with the keys masked if one was echoed."""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        return ""
    if not isinstance(message, str) or not message:
        return ""
    for key in keys:
        if key:
            message = message.replace(key, "***")
    return ": " + redact(message)[:200]
