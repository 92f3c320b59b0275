"""Logging in and out of the inspector, and its two static files."""

from __future__ import annotations

import secrets
from pathlib import PurePosixPath
from urllib.parse import parse_qsl

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memlane import __version__
from memlane.engine import threads
from memlane.files.admin_token import token_path
from memlane.proxy.state import current_state
from memlane.ui import auth
from memlane.ui.render import STATIC_FILES, STATIC_TYPES, page, static_file
from memlane.ui.web import (
    FORM_TYPE,
    MAX_FORM_BYTES,
    PREFIX,
    UIError,
    Who,
    admin_token,
    read_form,
    redirect,
    runtime_of,
)

router = APIRouter(prefix=PREFIX, include_in_schema=False)


def _login_page(request: Request, *, error: str = "", status: int = 200) -> Response:
    token = admin_token(request)
    nonce = secrets.token_urlsafe(18)
    settings = current_state(request).settings
    configured = settings.admin_token is not None and bool(settings.admin_token.get_secret_value())
    where = "MEMLANE_ADMIN_TOKEN" if configured else str(token_path(settings.home_path))
    values = {
        "csrf": "",
        "login_csrf": auth.login_csrf(token, nonce),
        "next": auth.safe_next(request.query_params.get("next")),
        "error": error,
        "where": where,
        "section": "login",
        "version": __version__,
    }
    response = page(request, "login.html", values, status=status)
    response.set_cookie(
        auth.LOGIN_COOKIE,
        nonce,
        max_age=auth.LOGIN_SECONDS,
        path=auth.COOKIE_PATH,
        httponly=True,
        samesite="strict",
    )
    return response


@router.get("/login")
async def login_form(request: Request) -> Response:
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    token = admin_token(request)
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    body = await request.body()
    if kind != FORM_TYPE or len(body) > MAX_FORM_BYTES:
        raise UIError(415, f"the login form is sent as {FORM_TYPE}")
    fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    nonce = request.cookies.get(auth.LOGIN_COOKIE, "")
    sent_csrf = fields.get(auth.CSRF_FIELD, "")
    if not nonce or not auth.token_matches(auth.login_csrf(token, nonce), sent_csrf):
        return _login_page(request, error="The form expired: log in again.", status=403)
    if not auth.token_matches(token, fields.get("token", "")):
        return _login_page(request, error="That is not the admin token.", status=401)
    response = redirect(auth.safe_next(fields.get("next")))
    auth.set_session_cookie(response, token)
    response.delete_cookie(auth.LOGIN_COOKIE, path=auth.COOKIE_PATH)
    return response


@router.post("/logout")
async def logout(request: Request, who: Who) -> Response:
    await read_form(request, who)
    if who.nonce is not None:  # a copy of the cookie is refused from now on, not only this one
        await threads.to_thread(auth.log_out, runtime_of(request).store, who.nonce)
    response = redirect("/ui/login")
    auth.clear_session_cookie(response)
    return response


@router.get("/static/{name}")
async def static(name: str) -> Response:
    if name not in STATIC_FILES:
        raise UIError(404, f"no static file {name!r}")
    media = STATIC_TYPES[PurePosixPath(name).suffix]
    return Response(
        static_file(name),
        media_type=media,
        headers={"cache-control": "max-age=3600", "x-content-type-options": "nosniff"},
    )
