"""The pooled HTTP client to the upstream, and what of a request is forwarded to it.

The upstream hop is on every model request, and in Python an HTTP client's own work
is a large share of what the proxy adds to one: aiohttp (its parser and writer in C)
costs about a quarter of the CPU httpx does per request, and a streamed answer is
handed on as it is read, however many events one read brings, instead of one piece per
chunk the upstream wrote. memlane's own LLM calls (background work) go through aiohttp
too, in sessions of their own (`text.http_session`).
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from typing import Literal

import aiohttp

from memlane.config import Settings
from memlane.proxy import headers as h
from memlane.proxy.access import note_upstream
from memlane.proxy.guard import with_via
from memlane.text.http_session import IDLE_SECONDS, env_proxy, once_more_if_broken
from memlane.text.tls import ssl_context

CONNECT_SECONDS = 10.0

LARGE_BODY = 1 << 20
"""A body above this (aiohttp's own threshold) is sent from a buffer in 64 KiB pieces, the
loop free between them; a smaller one goes in one write."""


class UpstreamError(Exception):
    """The upstream could not be reached, or broke off; `reason` names what happened."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer (or went silent) within `upstream_timeout`, or did not
    finish within `upstream_deadline`."""


def _error(exc: BaseException) -> UpstreamError:
    kind = UpstreamTimeout if isinstance(exc, TimeoutError) else UpstreamError
    return kind(_reason(exc))


def _reason(exc: BaseException) -> str:
    """What happened, in words a user can act on (the client library's class names are not)."""
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "its host name does not resolve"
    if isinstance(exc, aiohttp.ClientConnectorError):
        error = exc.os_error
        why = os.strerror(error.errno) if error.errno else str(error) or "refused"
        return f"cannot connect: {why.lower()}; is it running, and is the URL right?"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "it closed the connection before answering"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "its answer broke off before the end"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"its answer could not be read: {exc.message}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


FAILURES = (aiohttp.ClientError, TimeoutError, OSError)
"""What the client raises when the upstream is down, cut or silent."""


class UpstreamResponse:
    """The upstream's answer: its status and headers, and its body read whole (`aread`)
    or as it arrives (`aiter_bytes`); `aclose` hands the connection back (or drops it,
    when the body was not read to its end)."""

    def __init__(self, raw: aiohttp.ClientResponse) -> None:
        self._raw = raw
        self.status_code = raw.status
        self.headers = raw.headers
        self.content = b""

    async def aread(self) -> bytes:
        try:
            self.content = await self._raw.read()
        except FAILURES as exc:
            raise _error(exc) from exc
        finally:
            self._raw.release()
        return self.content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Everything read so far, each time more arrives."""
        stream = self._raw.content
        try:
            while chunk := await stream.readany():
                yield chunk
        except FAILURES as exc:
            raise _error(exc) from exc

    async def aclose(self) -> None:
        self._raw.release()

    def abort(self) -> None:
        """Drop the connection now: a read of the body waiting on it fails at once."""
        self._raw.close()


Provider = Literal["openai", "anthropic"]


class Upstream:
    """One aiohttp session per configured upstream: connections are kept and reused.

    `provider` says which configured upstream this is: the OpenAI-compatible one
    (`upstream_url`, a Bearer key) or the Anthropic one (`anthropic_upstream_url`, an
    `x-api-key`); neither ever gets the other's key. The session keeps no cookies: it
    serves every user of the proxy, so a cookie the upstream set for one of them must
    never travel with another's request. A proxy named in `HTTPS_PROXY` / `HTTP_PROXY`
    (and not bypassed by `NO_PROXY`) is used, as for memlane's other clients.
    """

    def __init__(self, settings: Settings, *, provider: Provider = "openai"):
        self.provider = provider
        if provider == "anthropic":
            self.base = settings.anthropic_upstream_url.rstrip("/")
            self._key = settings.anthropic_api_key
        else:
            self.base = settings.upstream_url.rstrip("/")
            self._key = settings.upstream_api_key
        self._timeout = aiohttp.ClientTimeout(
            total=settings.upstream_deadline,  # the whole request, its body read included
            sock_connect=min(CONNECT_SECONDS, settings.upstream_timeout),
            sock_read=settings.upstream_timeout,
        )
        self._proxy = env_proxy(self.base)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on first use (inside the event loop that serves)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=0, keepalive_timeout=IDLE_SECONDS, ssl=ssl_context()
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=self._timeout,
                skip_auto_headers=("User-Agent", "Content-Type"),  # only what the client sent
            )
        return self._session

    async def send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: Mapping[str, str],
        *,
        stream: bool = False,
    ) -> UpstreamResponse:
        """The upstream's answer; read whole unless `stream` (then read it as it comes, and
        `aclose` it). Raises `UpstreamError` (`UpstreamTimeout`) when there is none."""
        try:
            raw = await self._request(method, url, content, headers)
        except FAILURES as exc:
            raise _error(exc) from exc
        response = UpstreamResponse(raw)
        await note_upstream(response)
        if not stream:
            await response.aread()
        return response

    async def _request(
        self, method: str, url: str, content: bytes | None, headers: Mapping[str, str]
    ) -> aiohttp.ClientResponse:
        """The upstream's answer as it begins; sent once more when the connection broke
        first (`once_more_if_broken`): under load the pool can hand out a kept-alive
        connection the upstream is closing, and the client would get a 502 for a request
        that never reached it."""
        session = self._open()

        def once() -> Awaitable[aiohttp.ClientResponse]:
            data = io.BytesIO(content) if content and len(content) > LARGE_BODY else content
            return session.request(method, url, data=data, headers=headers, proxy=self._proxy)

        return await once_more_if_broken(once)

    def url(self, path: str) -> str:
        return self.base + path

    def headers(self, incoming: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
        """The client's headers (raw, as ASGI gives them) minus memlane's own and
        per-connection ones.

        The client's Authorization (or `x-api-key`) goes upstream as sent (never stored or
        logged); the configured upstream key is used only when the client sent none. A
        value that is not ASCII goes as the very bytes the client sent when they are UTF-8
        (what clients send); other bytes are replaced (U+FFFD), never refused.
        """
        out: dict[str, str] = {}
        for raw_name, raw_value in incoming:
            name = raw_name.decode("latin-1").lower()
            if name in h.HOP_BY_HOP or name.startswith(h.PREFIX):
                continue
            value = raw_value.decode("utf-8", errors="replace")
            out[name] = f"{out[name]}, {value}" if name in out else value
        key = self._key.get_secret_value() if self._key is not None else ""
        if key and "authorization" not in out:
            if self.provider == "openai":
                out["authorization"] = f"Bearer {key}"
            elif "x-api-key" not in out:
                out["x-api-key"] = key
        out["accept-encoding"] = "identity"
        out["via"] = with_via(out.get("via"))
        return out

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def relayed_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    """Upstream response headers worth passing back (request ids, rate limits, content
    type), as text the response can encode (Latin-1 for the bytes the upstream sent);
    a header sent several times is one, its values joined."""
    out: dict[str, str] = {}
    for name, value in upstream.items():
        if name.lower() in h.RESPONSE_DROP:
            continue
        if not value.isascii():
            value = value.encode("utf-8", errors="surrogateescape").decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out
