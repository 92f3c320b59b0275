"""One line per request, and the counters `memlane status` reads.

Every request memlane serves is logged at `info` (method, route, status, time, the
session's id prefix and the namespace (project) its memory used, the upstream's status
when it was asked, and for a governed model request what `X-Memlane-Context` says: the
tokens forwarded against the limit, and whether it compacted), without bodies or
credentials (for a client that shows no response headers, this is where to read it).
A status of 500 or more, or an upstream error relayed to the client, is a `warning`, at
most once per route and status every `WARN_EVERY` seconds (a failing upstream must not
flood the terminal).
Streams are measured to their last byte and never buffered.

The line is written, and the request counted, just before the response's last
message is handed on: a client that has read its whole answer can rely on the line
being there (a test, `memlane status` right after a request). A response that never
ends (the app failed, the client left) is logged when the app returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

from memlane.engine.runtime import Runtime
from memlane.proxy.headers import CONTEXT

CONTEXT_HEADER = CONTEXT.encode()

log = logging.getLogger("memlane.access")

WARN_EVERY = 10.0
SESSION_STATE = "memlane_session"
"""`request.state` key where the model routes leave the session id for this line."""
NAMESPACE_STATE = "memlane_namespace"
"""`request.state` key where the model routes leave the namespace (project) the turn used."""

_UPSTREAM: ContextVar[list[int] | None] = ContextVar("memlane_upstream_status", default=None)


async def note_upstream(response: Any) -> None:
    """The upstream client's response hook: the request being served asked the upstream, and
    it answered `response.status_code` (the last answer counts, after a tool round)."""
    statuses = _UPSTREAM.get()
    if statuses is not None:
        statuses.append(int(response.status_code))


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class AccessLog:
    """Pure ASGI middleware: log and count every HTTP answer."""

    def __init__(self, app: App, runtime_of: Callable[[], Runtime | None]) -> None:
        self.app = app
        self.runtime_of = runtime_of
        self._warned: dict[tuple[str, int], float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        context = ""
        started = time.perf_counter()
        upstream: list[int] = []
        token = _UPSTREAM.set(upstream)
        logged = False

        def record() -> None:
            nonlocal logged
            logged = True
            elapsed = (time.perf_counter() - started) * 1000
            rt = self.runtime_of()
            if rt is not None:
                rt.activity.request(status)
            self._line(scope, status, elapsed, upstream[-1] if upstream else None, context)

        async def watched(message: MutableMapping[str, Any]) -> None:
            nonlocal status, context
            if message["type"] == "http.response.start":
                status = int(message["status"])
                context = _context(message.get("headers") or ())
            final = message["type"] == "http.response.body" and not message.get("more_body")
            if final and not logged:  # before the last byte leaves: the client cannot be first
                record()
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            _UPSTREAM.reset(token)
            if not logged:
                record()

    def _line(
        self, scope: Scope, status: int, ms: float, upstream: int | None, context: str = ""
    ) -> None:
        route = str(scope.get("path", ""))
        state = scope.get("state") or {}
        session = str(state.get(SESSION_STATE) or "-")[:8]
        namespace = state.get(NAMESPACE_STATE)
        where = f" namespace {namespace}" if namespace else ""
        line = "%s %s %d %.1f ms session %s%s upstream %s%s"
        asked = "-" if upstream is None else str(upstream)
        args = (scope.get("method", ""), route, status, ms, session, where, asked, context)
        if status < 400 or route == "/health":
            log.info(line, *args)
            return
        now = time.monotonic()
        key = (route, status)
        if now - self._warned.get(key, 0.0) >= WARN_EVERY:
            self._warned[key] = now
            log.warning(line, *args)
        else:
            log.info(line, *args)


def _context(headers: Any) -> str:
    """` context 1,607/6,144 tokens[, compacted]` from the `X-Memlane-Context` header, if any."""
    for name, value in headers:
        if bytes(name).lower() != CONTEXT_HEADER:
            continue
        fields = dict(
            part.strip().partition("=")[::2] for part in bytes(value).decode("latin-1").split(";")
        )
        try:
            tokens, limit = int(fields["tokens"]), int(fields["limit"])
        except (KeyError, ValueError):
            return ""
        compacted = ", compacted" if fields.get("compacted") == "1" else ""
        return f" context {tokens:,}/{limit:,} tokens{compacted}"
    return ""
