"""The one pooled HTTP client to the upstream, and what of a request is forwarded to it."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping

import httpx

from memlane.config import Settings
from memlane.proxy import headers as h


class Upstream:
    """An `httpx.AsyncClient` per app: connections to the upstream are kept and reused."""

    def __init__(self, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None):
        self.base = settings.upstream_url.rstrip("/")
        self._key = settings.upstream_api_key
        timeout = httpx.Timeout(
            settings.upstream_timeout, connect=min(10.0, settings.upstream_timeout)
        )
        if transport is None:  # small writes go out at once, never held for a delayed ACK
            nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
            transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=nodelay)
        self.client = httpx.AsyncClient(timeout=timeout, transport=transport)

    def url(self, path: str) -> str:
        return self.base + path

    def headers(self, incoming: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The client's headers minus memlane's own and per-connection ones.

        The client's Authorization goes upstream as sent (never stored or logged);
        the configured upstream key is used only when the client sent none.
        """
        out = {
            name: value
            for name, value in incoming
            if name not in h.HOP_BY_HOP and not name.startswith(h.PREFIX)
        }
        if "authorization" not in out and self._key is not None and self._key.get_secret_value():
            out["authorization"] = f"Bearer {self._key.get_secret_value()}"
        out["accept-encoding"] = "identity"
        return out

    async def aclose(self) -> None:
        await self.client.aclose()


def relayed_headers(upstream: Mapping[str, str]) -> dict[str, str]:
    """Upstream response headers worth passing back (request ids, rate limits, content type)."""
    return {k: v for k, v in upstream.items() if k.lower() not in h.RESPONSE_DROP}
