"""What every inspector route shares: the viewer dependency, forms with CSRF, errors, context.

Routes take `who: Who` (a signed-in viewer, or a redirect to the login form),
read forms with `read_form` (url-encoded, bounded, CSRF-checked), and render
with `context(...)`, which adds what the base template needs.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import Depends, FastAPI, Query
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from memlane import __version__
from memlane.engine import threads
from memlane.engine.runtime import Runtime
from memlane.proxy.state import current_state
from memlane.ui import auth
from memlane.ui.render import SECURITY_HEADERS, page

PREFIX = "/ui"
"""Where the inspector's routes are (each router's prefix)."""
SOURCES = frozenset({"query", "path", "body", "header", "cookie"})
"""Where a request field comes from, as a validation error's location starts."""
MAX_FORM_BYTES = 256 * 1024
"""Largest form accepted: a memory is at most 20,000 characters, a todo a few thousand."""
FORM_TYPE = "application/x-www-form-urlencoded"


class LoginRequired(Exception):
    """No valid credential: a page redirects to the login form, htmx and scripts get 401."""


class TokenAccepted(Exception):
    """`?token=` was right: set the cookie and redirect to the same page without it."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


class UIError(Exception):
    """A request the inspector refuses; shown as a page with the status and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def admin_token(request: Request) -> str:
    return current_state(request).admin_token


def runtime_of(request: Request) -> Runtime:
    return current_state(request).runtime


async def signed_in(request: Request) -> auth.Viewer:
    token = admin_token(request)
    query_token = request.query_params.get("token")
    if query_token is not None:
        if request.method == "GET" and auth.token_matches(token, query_token):
            raise TokenAccepted(auth.without_token(request))
        raise LoginRequired
    who = auth.viewer(request, token)
    if who is None:
        raise LoginRequired
    if who.nonce is not None:
        store = runtime_of(request).store
        if await threads.to_thread(auth.logged_out, store, who.nonce):
            raise LoginRequired
    return who


Who = Annotated[auth.Viewer, Depends(signed_in)]


async def rt_dep(request: Request) -> Runtime:
    """The engine, once the answers its clients were given are stored (they are stored
    just after the client has them: a page shows what a client was answered)."""
    rt = runtime_of(request)
    await rt.writes.settled()
    return rt


Rt = Annotated[Runtime, Depends(rt_dep)]

PageNumber = Annotated[int, Query(alias="page", ge=1, le=100_000)]
"""A list page's `?page=` (from 1)."""


async def read_form(request: Request, who: auth.Viewer) -> dict[str, str]:
    """The POSTed form's fields (the last value of each), after the CSRF check."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != FORM_TYPE:
        raise UIError(415, f"the inspector's forms are sent as {FORM_TYPE}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise UIError(413, f"the form is larger than {MAX_FORM_BYTES // 1024} KiB")
    try:
        fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        raise UIError(400, "the form is not UTF-8") from None
    sent = request.headers.get(auth.CSRF_HEADER) or fields.get(auth.CSRF_FIELD, "")
    if not auth.csrf_ok(admin_token(request), who, sent):
        raise UIError(403, "the form's CSRF token is missing or stale: reload the page and retry")
    return fields


def context(request: Request, who: auth.Viewer, section: str, **values: Any) -> dict[str, Any]:
    """What every page's template reads besides its own values."""
    csrf = auth.csrf_token(admin_token(request), who.nonce) if who.nonce else ""
    return {"csrf": csrf, "section": section, "version": __version__, "request": request, **values}


def confirm(request: Request, who: auth.Viewer, section: str, **asked: str) -> Response:
    """The page that asks before a destructive POST (`asked`: its heading, detail, action
    and button); Cancel goes back to the page of the item the action is on."""
    back = asked["action"].rpartition("/")[0]
    return page(request, "confirm.html", context(request, who, section, back=back, **asked))


def redirect(target: str) -> Response:
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


def install(app: FastAPI) -> None:
    """The inspector's answers to its own exceptions (HTML, not the API's JSON errors)."""

    async def login_required(request: Request, exc: Exception) -> Response:
        login = "/ui/login?next=" + quote(auth.safe_next(request.url.path), safe="/")
        scripted = "authorization" in request.headers or request.headers.get("hx-request")
        if request.method == "GET" and not scripted:
            return redirect(login)
        headers = {**SECURITY_HEADERS, "hx-redirect": login}
        return Response(
            "the inspector needs the admin token: log in at /ui/login, or send "
            "Authorization: Bearer <token>",
            status_code=401,
            headers=headers,
            media_type="text/plain",
        )

    async def token_accepted(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TokenAccepted)
        response = redirect(exc.target)
        auth.set_session_cookie(response, admin_token(request))
        return response

    async def ui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UIError)
        values = {"status": exc.status, "message": exc.message, "csrf": "", "section": ""}
        return page(request, "error.html", values | {"version": __version__}, status=exc.status)

    api_validation = app.exception_handlers.get(RequestValidationError)

    async def validation_error(request: Request, exc: Exception) -> Response:
        """A request the inspector's route could not read (a form or query field of the
        wrong kind): its HTML error page, 422; any other route's answer is left as it was
        (the proxy's and the admin API's JSON)."""
        assert isinstance(exc, RequestValidationError)
        if not is_inspector(request.url.path):
            if api_validation is None:
                return await request_validation_exception_handler(request, exc)
            answer = api_validation(request, exc)
            return await answer if inspect.isawaitable(answer) else answer
        return await ui_error(request, UIError(422, invalid_request(exc)))

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(TokenAccepted, token_accepted)
    app.add_exception_handler(UIError, ui_error)
    app.add_exception_handler(RequestValidationError, validation_error)


def is_inspector(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def invalid_request(exc: RequestValidationError) -> str:
    """What was wrong, field by field: `page 'abc': Input should be a valid integer, …`."""
    said = []
    for error in exc.errors():
        where = [str(part) for part in error.get("loc", ()) if part not in SOURCES]
        name = ".".join(where) or "the request"
        value = f" {error['input']!r}" if where and isinstance(error.get("input"), str) else ""
        said.append(f"{name}{value}: {error.get('msg', 'not valid')}")
    return "; ".join(said) or "the request is not valid"
