"""Errors the proxy answers with, in the client's own format with the right status.

Anthropic routes (`/v1/messages…`) get Anthropic's error object, every other route
OpenAI's, whichever part of memlane refused the request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import Send

from memlane.proxy.wire.anthropic import PREFIX as ANTHROPIC_PREFIX
from memlane.proxy.wire.anthropic import anthropic_error, error_type
from memlane.proxy.wire.base import openai_error
from memlane.text.redact import redact


def error_payload(
    path: str, status: int, message: str, *, type: str, code: str | None, param: str | None
) -> dict[str, object]:
    """The error body for a request to `path`: Anthropic's shape on its routes, else OpenAI's."""
    if path.startswith(ANTHROPIC_PREFIX):
        return anthropic_error(message, error_type(status, type, code))
    return openai_error(message, type=type, code=code, param=param)


API_ROUTES = ("chat/completions", "responses", "messages", "models", "embeddings", "completions")
"""What a client asks for when its base URL lacks the `/v1` memlane serves them under."""


def not_found(path: str, base_url: str) -> str:
    """What a 404 says: where the route is when the client only left out `/v1`."""
    bare = path.strip("/")
    if bare.split("/", 1)[0] != "v1" and bare.startswith(API_ROUTES):
        return (
            f"no route {path}: memlane serves it at /v1/{bare}. Set the client's base URL to "
            f"{base_url}v1 (OpenAI clients), or {base_url.rstrip('/')} (Anthropic clients)"
        )
    return f"no route {path}: memlane's API is under /v1/ and its inspector under /ui"


class ProxyError(Exception):
    """A request the proxy refuses or cannot serve; rendered as `{"error": {...}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def response(self, path: str = "") -> JSONResponse:
        body = error_payload(
            path, self.status, self.message, type=self.type, code=self.code, param=self.param
        )
        return JSONResponse(body, status_code=self.status)


STOPPING = "memlane_stopping"
"""The code of a request a graceful stop cut: the grace it gives the requests in flight
(`shutdown_grace_seconds`) ran out while this one still waited on its upstream."""

STOPPED = (
    "memlane stopped before this request was answered (a graceful stop gives the requests "
    "in flight MEMLANE_SHUTDOWN_GRACE_SECONDS). Send it again."
)


def stopped() -> ProxyError:
    """The client's answer to a request a graceful stop cut: a 503, which the SDKs send
    again (to this memlane once it is back, or to another replica)."""
    return ProxyError(503, STOPPED, type="server_error", code=STOPPING)


def stop_handled() -> None:
    """The request's task was cancelled by the server's graceful stop and the request is
    answered all the same: the cancellation is handled here, not raised further."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def install_handlers(app: FastAPI) -> None:
    """Make FastAPI's own errors (404, validation, …) speak the client's error format too."""

    async def proxy_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ProxyError)
        return exc.response(request.url.path)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 404 and exc.detail == "Not Found":  # no route matched
            return ProxyError(
                404, not_found(path, str(request.base_url)), type="not_found"
            ).response(path)
        return ProxyError(exc.status_code, str(exc.detail)).response(path)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        message = f"{where}: {first.get('msg', 'invalid')}" if where else "invalid request"
        return ProxyError(422, message, param=where).response(request.url.path)

    app.add_exception_handler(ProxyError, proxy_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)


UPSTREAM_ERROR_CHARS = 300


def upstream_refusal(base: str, status: int, content: bytes) -> str:
    """One line a person reads later (`memlane doctor`): who refused, how, and why, with
    anything that looks like a secret redacted (an upstream may echo the key it refused)."""
    text = " ".join(content[:4_000].decode("utf-8", errors="replace").split())
    return redact(f"{base} answered {status}: {text}")[:UPSTREAM_ERROR_CHARS]


async def send_json(
    send: Send,
    status: int,
    payload: Mapping[str, Any],
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """A whole JSON answer sent through raw ASGI: for the middlewares and mounted apps that
    refuse a request before FastAPI (and its `JSONResponse`) sees it."""
    body = json.dumps(payload).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*start, *headers]})
    await send({"type": "http.response.body", "body": body})
