"""Errors the proxy answers with, always as an OpenAI error object with the right status."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from memlane.proxy.wire.base import openai_error


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

    def response(self) -> JSONResponse:
        body = openai_error(self.message, type=self.type, code=self.code, param=self.param)
        return JSONResponse(body, status_code=self.status)


def install_handlers(app: FastAPI) -> None:
    """Make FastAPI's own errors (404, validation, …) speak OpenAI's error format too."""

    async def proxy_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ProxyError)
        return exc.response()

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return ProxyError(exc.status_code, str(exc.detail), type=kind).response()

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        message = f"{where}: {first.get('msg', 'invalid')}" if where else "invalid request"
        return ProxyError(422, message, param=where).response()

    app.add_exception_handler(ProxyError, proxy_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
