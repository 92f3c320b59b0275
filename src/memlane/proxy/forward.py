"""The pooled HTTP clients to the upstream, and what of a request is forwarded to it."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterable, Mapping
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Literal

import httpx

from memlane.config import Settings
from memlane.proxy import headers as h
from memlane.proxy.access import note_upstream
from memlane.proxy.guard import with_via

POOL_SHARDS = 4
"""Connection pools to the upstream, used in turn. httpcore scans every connection of a
pool (a readability poll each, and a quadratic idle count) whenever a request starts or
ends; four smaller pools cut the proxy's CPU per request by ~20% at 32 concurrent clients."""


UPSTREAM_IDLE_SECONDS = 4.0
"""An idle connection to the upstream is dropped after this long: before the 5 s after
which uvicorn-served upstreams (vLLM, llama.cpp's Python servers) close theirs. With the
same 5 s on both sides, a request sent on a connection the server is closing at that very
moment fails, and the client would get a 502 for it."""


def _pool() -> httpx.AsyncHTTPTransport:
    """Small writes go out at once, never held for a delayed ACK."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    limits = httpx.Limits(
        max_connections=None,
        max_keepalive_connections=100,
        keepalive_expiry=UPSTREAM_IDLE_SECONDS,
    )
    return httpx.AsyncHTTPTransport(limits=limits, socket_options=nodelay)


def _client(timeout: httpx.Timeout, transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
    """A client that keeps no cookies: one client serves every user of the proxy, so a
    cookie the upstream set for one of them must never travel with another's request."""
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return httpx.AsyncClient(
        timeout=timeout,
        transport=transport,
        cookies=no_cookies,
        event_hooks={"response": [note_upstream]},  # the access line names its status
    )


Provider = Literal["openai", "anthropic"]


class Upstream:
    """`httpx.AsyncClient`s per app: connections to the upstream are kept and reused.

    An injected transport (tests) gets one client; otherwise `POOL_SHARDS` clients,
    each with its own pool, take requests in turn. `provider` says which configured
    upstream this is: the OpenAI-compatible one (`upstream_url`, a Bearer key) or the
    Anthropic one (`anthropic_upstream_url`, an `x-api-key`); neither ever gets the
    other's key.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        provider: Provider = "openai",
    ):
        self.provider = provider
        if provider == "anthropic":
            self.base = settings.anthropic_upstream_url.rstrip("/")
            self._key = settings.anthropic_api_key
        else:
            self.base = settings.upstream_url.rstrip("/")
            self._key = settings.upstream_api_key
        timeout = httpx.Timeout(
            settings.upstream_timeout, connect=min(10.0, settings.upstream_timeout)
        )
        if transport is not None:
            self._clients = [_client(timeout, transport)]
        else:
            self._clients = [_client(timeout, _pool()) for _ in range(POOL_SHARDS)]
        self._next = itertools.cycle(self._clients)

    @property
    def client(self) -> httpx.AsyncClient:
        """The next pool, round robin."""
        return next(self._next)

    def url(self, path: str) -> str:
        return self.base + path

    def headers(self, incoming: Iterable[tuple[str, str]]) -> httpx.Headers:
        """The client's headers minus memlane's own and per-connection ones.

        The client's Authorization (or `x-api-key`) goes upstream as sent (never stored or
        logged); the configured upstream key is used only when the client sent none. A value
        that is not ASCII goes as the very bytes the client sent (httpx refuses such text;
        HTTP allows the bytes).
        """
        out = {
            name: value
            for name, value in incoming
            if name not in h.HOP_BY_HOP and not name.startswith(h.PREFIX)
        }
        key = self._key.get_secret_value() if self._key is not None else ""
        if key and "authorization" not in out:
            if self.provider == "openai":
                out["authorization"] = f"Bearer {key}"
            elif "x-api-key" not in out:
                out["x-api-key"] = key
        out["accept-encoding"] = "identity"
        out["via"] = with_via(out.get("via"))
        # Starlette decoded each header as Latin-1: encoding it so gives the client's bytes.
        return httpx.Headers(
            [(k.encode("latin-1"), v.encode("latin-1", errors="replace")) for k, v in out.items()]
        )

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


def relayed_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    """Upstream response headers worth passing back (request ids, rate limits, content type)."""
    return {k: v for k, v in upstream.items() if k.lower() not in h.RESPONSE_DROP}
