"""Who may see the inspector: the admin token, carried by a cookie, a header or once in the URL.

The inspector reads and rewrites every session and memory, so it asks for the
same token as the admin API (`/v1/memlane/…`):

- a person logs in once with the form at `/ui/login`; memlane answers with an
  HttpOnly, SameSite=Strict cookie (path `/ui`) that holds no token, only a
  random nonce, its issue time and a MAC keyed by the token: changing the token
  logs every browser out, and logging out keeps the nonce in the store until the
  cookie would have expired (`log_out`), so a copy of it is refused too;
- a script sends `Authorization: Bearer <token>`, as to the admin API;
- `/ui?token=…` (a link a script or a launcher builds) is accepted on a GET:
  it sets the cookie and redirects to the same page without the token, so the
  token does not stay in the address bar or the history.

Every form carries a CSRF token derived from the cookie's nonce (htmx sends it
as `X-CSRF-Token`); a POST without the right one is refused. The login form
has its own, tied to a short-lived pre-login cookie. The Host/Origin guard
(`proxy.guard`) applies before any of this.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import Response

from memlane.store.base import MetaStore

COOKIE = "memlane_ui"
LOGIN_COOKIE = "memlane_ui_login"
COOKIE_PATH = "/ui"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_SECONDS = 7 * 24 * 3600
"""How long a login lasts."""
LOGIN_SECONDS = 3600
"""How long a login form may stay open before it must be reloaded."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: by cookie (forms need the CSRF token) or by bearer token (a script)."""

    nonce: str | None
    """The cookie's nonce; None for a bearer-token request."""

    @property
    def by_cookie(self) -> bool:
        return self.nonce is not None


def _mac(token: str, *parts: str) -> str:
    digest = hmac.new(token.encode(), "|".join(parts).encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def token_matches(token: str, sent: str) -> bool:
    return bool(token) and hmac.compare_digest(sent.strip().encode(), token.encode())


def new_cookie(token: str, *, now: float | None = None) -> str:
    nonce = secrets.token_urlsafe(18)
    issued = str(int(time.time() if now is None else now))
    return f"{nonce}.{issued}.{_mac(token, 'session', nonce, issued)}"


def cookie_nonce(token: str, value: str, *, now: float | None = None) -> str | None:
    """The nonce of a valid, unexpired cookie; None otherwise."""
    parts = value.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    nonce, issued, mac = parts
    if not hmac.compare_digest(mac.encode(), _mac(token, "session", nonce, issued).encode()):
        return None
    age = (time.time() if now is None else now) - int(issued)
    return nonce if 0 <= age <= SESSION_SECONDS else None


LOGGED_OUT_META = "ui_logged_out"
"""The store's meta key holding the nonces of cookies logged out before they expired."""


def logged_out(store: MetaStore, nonce: str) -> bool:
    """Whether the cookie of `nonce` was logged out: a cookie holds no state, so a copy
    of it would otherwise stay valid for its seven days."""
    return nonce in _logged_out(store)


def log_out(store: MetaStore, nonce: str, *, now: float | None = None) -> None:
    """Remember `nonce` as logged out until its cookie would have expired anyway (what
    has expired is dropped then: the list stays as short as the logins of a week)."""
    current = time.time() if now is None else now
    kept = {n: until for n, until in _logged_out(store).items() if until > current}
    kept[nonce] = current + SESSION_SECONDS
    store.set_meta(LOGGED_OUT_META, json.dumps(kept))


def _logged_out(store: MetaStore) -> dict[str, float]:
    try:
        found = json.loads(store.get_meta(LOGGED_OUT_META) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def csrf_token(token: str, nonce: str) -> str:
    return _mac(token, "csrf", nonce)


def login_csrf(token: str, nonce: str) -> str:
    return _mac(token, "login", nonce)


def viewer(request: Request, token: str) -> Viewer | None:
    """The request's viewer, or None when it carries no valid credential."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token_matches(token, value):
        return Viewer(None)
    nonce = cookie_nonce(token, request.cookies.get(COOKIE, ""))
    return Viewer(nonce) if nonce else None


def csrf_ok(token: str, who: Viewer, sent: str) -> bool:
    """A script with the bearer token needs no CSRF token: no page can send its header."""
    if not who.by_cookie:
        return True
    assert who.nonce is not None
    return bool(sent) and hmac.compare_digest(sent.encode(), csrf_token(token, who.nonce).encode())


def set_session_cookie(response: Response, token: str) -> None:
    response.set_cookie(
        COOKIE,
        new_cookie(token),
        max_age=SESSION_SECONDS,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a page of the inspector, never another site."""
    if not target or not target.startswith(COOKIE_PATH) or target.startswith("//"):
        return COOKIE_PATH
    if "\\" in target or any(ord(c) < 32 for c in target):
        return COOKIE_PATH
    return target


def without_token(request: Request) -> str:
    """The request's path and query without `token=…`: where `/ui?token=` redirects."""
    kept = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")
