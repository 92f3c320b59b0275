"""The aiohttp sessions memlane's own HTTP calls go through, and what every one of them
shares with the proxy's upstream client: the idle limit, the environment's proxy, and one
more try when a connection breaks under a request.

aiohttp parses and writes HTTP in C: an own LLM call through it costs the event loop a
fraction of what it cost through httpx and httpcore's connection-pool scan
(`benchmarks/own_llm_calls.py`), and that loop is the one client requests are served on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from memlane.text.tls import ssl_context

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("memlane.http")

T = TypeVar("T")

IDLE_SECONDS = 4.0
"""An idle connection is dropped after this long: before the 5 s after which
uvicorn-served upstreams (vLLM, llama.cpp's Python servers) close theirs. With the same
5 s on both sides, a request sent on a connection the server is closing at that very
moment fails (and a client of the proxy would get a 502 for it)."""


def open_session(*, limit: int = 100) -> aiohttp.ClientSession:
    """A session for the running event loop: memlane's TLS context, connections kept for
    `IDLE_SECONDS`, at most `limit` open at once (0: no limit), and no cookies (a session
    serves every user's calls, so a cookie set for one must never travel with another's).
    aiohttp is imported here, when a call is made: a CLI command that makes none (most
    read the store) does not load it (0.17 s of a start)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=IDLE_SECONDS, ssl=ssl_context())
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())


def env_proxy(base: str) -> str | None:
    """The proxy the environment names for `base` (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
    minus `NO_PROXY`), if any: read once per client, not per request. `urllib.request` is
    imported here, as aiohttp is in `open_session`: 40 ms of a CLI command's start."""
    import urllib.request

    parts = urlsplit(base)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not parts.hostname:
        return None
    if urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


BROKE_AT_ONCE_SECONDS = 10.0
"""A connection that breaks this soon after its request was sent is tried once more
(`once_more_if_broken`): one the server was closing breaks at once (plus however far
behind the event loop runs). One that breaks later may have been worked on, as when a
load balancer cuts a long answer at its idle timeout: sending it again would pay for it
twice and make the client wait twice as long for the same error."""


async def once_more_if_broken(send: Callable[[], Awaitable[T]]) -> T:
    """`send()`, and once more when its connection broke at once, before the answer began.

    A pool can hand out a kept-alive connection the server is closing at its idle timeout
    (`IDLE_SECONDS` is under uvicorn's 5 s, but an event loop running seconds behind
    starts its clock late), and the request fails without reaching the server; an SDK
    would retry the 502 the same way, after a back-off. A connection refused (another
    try would be refused too), a timeout (it would double the wait) and a break after
    `BROKE_AT_ONCE_SECONDS` are not retried, and a second break is raised. `send` makes a
    new request each time (its body again)."""
    import aiohttp

    sent = time.monotonic()
    try:
        return await send()
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        refused_or_timed_out = isinstance(exc, aiohttp.ClientConnectorError | TimeoutError)
        if refused_or_timed_out or time.monotonic() - sent > BROKE_AT_ONCE_SECONDS:
            raise
        log.info("a connection broke under a request (%s): sent once more", type(exc).__name__)
    return await send()
