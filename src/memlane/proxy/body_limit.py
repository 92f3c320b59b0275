"""Every route's body under the one limit the model routes have (`max_body_bytes`).

The model routes read their body themselves (`proxy.turns.read_body`) and answer 413
past the limit. The other routes (the admin API, the inspector's forms, `/mcp`) were
read by FastAPI whole, whatever their size: a 60 MB `PUT …/pinned` was stored. Here
such a body is read first, up to the limit; past it the client gets the same 413 in
its wire format and the route never runs.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.proxy.errors import error_payload, send_json

DRAIN_FACTOR = 4
"""A body over the limit is read and dropped up to this many times the limit, so the client
gets its 413 instead of a broken pipe; beyond that the connection is cut."""
BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


def too_large(limit: int) -> str:
    """What a client sending a body over `limit` is told."""
    return f"request body is larger than the limit of {limit} bytes (MEMLANE_MAX_BODY_BYTES)"


class BodyLimit:
    """Pure ASGI: a body past `limit` is refused with 413 before `app` sees the request;
    POSTs to `own_paths` (routes that read and limit their body themselves) pass as sent."""

    def __init__(self, app: ASGIApp, limit: int, *, own_paths: Container[str]) -> None:
        self.app = app
        self.limit = limit
        self.own_paths = own_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method", "GET")
        path = str(scope.get("path", ""))
        if method in BODYLESS or (method == "POST" and path in self.own_paths):
            await self.app(scope, receive, send)
            return
        messages, over = await self._read(scope, receive)
        if over:
            await _refuse(send, path, self.limit)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _read(self, scope: Scope, receive: Receive) -> tuple[list[Message], bool]:
        """The request's body messages, or the fact that it is over the limit (its body
        read and dropped up to `DRAIN_FACTOR` times the limit)."""
        declared = _content_length(scope)
        over = declared is not None and declared > self.limit
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                messages.append(message)  # a disconnect: the route sees it as it would have
                return ([] if over else messages), over
            size += len(message.get("body", b""))
            over = over or size > self.limit
            if over:
                messages.clear()
                if size > self.limit * DRAIN_FACTOR:
                    return [], True
            else:
                messages.append(message)
            if not message.get("more_body", False):
                return messages, over


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length" and value.isdigit():
            return int(value)
    return None


async def _refuse(send: Send, path: str, limit: int) -> None:
    payload: dict[str, Any] = error_payload(
        path,
        413,
        too_large(limit),
        type="invalid_request_error",
        code="request_too_large",
        param=None,
    )
    await send_json(send, 413, payload, [(b"connection", b"close")])
