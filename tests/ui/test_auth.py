"""Who may open the inspector: the admin token by cookie, bearer header or a one-time link;
CSRF on every form; the Host/Origin guard first; pages that load nothing from elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from memlane.config import Settings
from memlane.proxy.startup import Probe, report
from memlane.ui import auth
from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory, RunningProxy
from tests.ui.conftest import CSRF, bearer_client, browser_client, form, token_of


@pytest.fixture
def quiet(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory(**QUIET)


def test_pages_redirect_to_the_login_form_without_a_credential(quiet: RunningProxy) -> None:
    with httpx.Client(base_url=quiet.base, timeout=30) as anonymous:
        page = anonymous.get("/ui/sessions?q=x")
        assert page.status_code == 303
        assert page.headers["location"] == "/ui/login?next=/ui/sessions"
        htmx = anonymous.get("/ui/sessions", headers={"hx-request": "true"})
        assert htmx.status_code == 401
        assert htmx.headers["hx-redirect"].startswith("/ui/login")
        wrong = anonymous.get("/ui/sessions", headers={"authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401
        assert anonymous.post("/ui/logout").status_code == 401
        assert "memlane_ui" not in anonymous.cookies


def test_a_script_reads_pages_with_the_bearer_token(quiet: RunningProxy) -> None:
    with bearer_client(quiet) as client:
        page = client.get("/ui/sessions")
    assert page.status_code == 200
    assert "<h1>Sessions</h1>" in page.text


def test_logging_in_sets_an_httponly_strict_cookie_that_holds_no_token(
    quiet: RunningProxy,
) -> None:
    with httpx.Client(base_url=quiet.base, timeout=30) as client:
        login = client.get("/ui/login?next=/ui/memories")
        csrf = CSRF.search(login.text)
        assert csrf is not None
        assert 'value="/ui/memories"' in login.text
        done = client.post(
            "/ui/login",
            data={"csrf": csrf.group(1), "token": token_of(quiet), "next": "/ui/memories"},
        )
        assert done.status_code == 303
        assert done.headers["location"] == "/ui/memories"
        cookie = next(h for h in done.headers.get_list("set-cookie") if h.startswith("memlane_ui="))
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        assert "Path=/ui" in cookie
        assert token_of(quiet) not in cookie
        assert client.get("/ui/memories").status_code == 200


def test_the_login_form_refuses_a_wrong_token_a_missing_csrf_and_foreign_next(
    quiet: RunningProxy,
) -> None:
    with httpx.Client(base_url=quiet.base, timeout=30) as client:
        csrf = CSRF.search(client.get("/ui/login").text)
        assert csrf is not None
        wrong = client.post("/ui/login", data={"csrf": csrf.group(1), "token": "guess-guess-guess"})
        assert wrong.status_code == 401
        assert "not the admin token" in wrong.text
        assert "memlane_ui" not in client.cookies
        no_csrf = client.post("/ui/login", data={"token": token_of(quiet)})
        assert no_csrf.status_code == 403
        assert "memlane_ui" not in client.cookies
        csrf = CSRF.search(client.get("/ui/login").text)
        assert csrf is not None
        away = client.post(
            "/ui/login",
            data={"csrf": csrf.group(1), "token": token_of(quiet), "next": "//evil.example/x"},
        )
        assert away.status_code == 303
        assert away.headers["location"] == "/ui"


def test_a_token_link_works_once_and_redirects_without_the_token(quiet: RunningProxy) -> None:
    with httpx.Client(base_url=quiet.base, timeout=30) as client:
        link = client.get(f"/ui/sessions?q=abc&token={token_of(quiet)}")
        assert link.status_code == 303
        assert link.headers["location"] == "/ui/sessions?q=abc"
        assert token_of(quiet) not in link.headers["location"]
        assert client.get("/ui/sessions?q=abc").status_code == 200  # the cookie it set
    with httpx.Client(base_url=quiet.base, timeout=30) as other:
        bad = other.get("/ui/sessions?token=wrong-wrong-wrong")
        assert bad.status_code == 303
        assert bad.headers["location"].startswith("/ui/login")


def test_a_form_without_the_csrf_token_changes_nothing(quiet: RunningProxy) -> None:
    session = quiet.store.ensure_session("csrf-target")
    url = f"/ui/sessions/{session.id}/texts"
    with browser_client(quiet) as client:
        refused = client.post(url, data={"todo": "- [ ] written by another page"})
        assert refused.status_code == 403
        assert "CSRF" in refused.text
        stale = client.post(url, data={"todo": "- [ ] x", "csrf": "not-the-token"})
        assert stale.status_code == 403
        sessions_file = quiet.settings.sessions_path
        assert not any(sessions_file.rglob("todo.md"))
        done = form(client, url, f"/ui/sessions/{session.id}", todo="- [ ] written by me")
        assert done.status_code == 303
    assert [p.read_text() for p in sessions_file.rglob("todo.md")] == ["- [ ] written by me"]


def test_a_script_with_the_bearer_token_needs_no_csrf(quiet: RunningProxy) -> None:
    session = quiet.store.ensure_session("script-target")
    with bearer_client(quiet) as client:
        done = client.post(f"/ui/sessions/{session.id}/title", data={"title": "Renamed by script"})
    assert done.status_code == 303
    assert quiet.store.get_session(session.id).title == "Renamed by script"


def test_a_foreign_origin_is_refused_before_the_inspector(quiet: RunningProxy) -> None:
    session = quiet.store.ensure_session("origin-target")
    with browser_client(quiet) as client:
        refused = client.post(
            f"/ui/sessions/{session.id}/title",
            data={"title": "from evil", "csrf": "x"},
            headers={"origin": "https://evil.example"},
        )
        rebound = client.get("/ui/sessions", headers={"host": "evil.example"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "origin_not_allowed"
    assert rebound.status_code == 403
    assert quiet.store.get_session(session.id).title is None


def test_logout_ends_the_login(quiet: RunningProxy) -> None:
    with browser_client(quiet) as client:
        copied = client.cookies[auth.COOKIE]  # another tab, or a copy someone kept
        done = form(client, "/ui/logout", "/ui")
        assert done.status_code == 303
        assert client.get("/ui").status_code == 303
    with httpx.Client(base_url=quiet.base, cookies={auth.COOKIE: copied}) as copy:
        assert copy.get("/ui/sessions").status_code == 303  # logged out everywhere
    with browser_client(quiet) as again:  # a new login is not affected
        assert again.get("/ui/sessions").status_code == 200


def test_pages_allow_nothing_but_their_own_origin(quiet: RunningProxy) -> None:
    with bearer_client(quiet) as client:
        page = client.get("/ui")
        script = client.get("/ui/static/htmx.min.js")
        missing = client.get("/ui/static/../app.py")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    # every URL the page loads is on memlane itself
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources
    assert all(s.startswith(("/ui", "#", "data:")) for s in sources), sources
    assert script.status_code == 200
    assert script.text.startswith("var htmx=")
    assert missing.status_code == 404


def test_the_inspector_can_be_switched_off(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET, ui_enabled=False)
    with bearer_client(proxy) as client:
        assert client.get("/ui").status_code == 404


def test_a_cookie_is_bound_to_the_token_and_expires() -> None:
    cookie = auth.new_cookie("token-one-token-one", now=1_000_000)
    assert auth.cookie_nonce("token-one-token-one", cookie, now=1_000_100)
    assert auth.cookie_nonce("token-two-token-two", cookie, now=1_000_100) is None
    later = 1_000_000 + auth.SESSION_SECONDS + 1
    assert auth.cookie_nonce("token-one-token-one", cookie, now=later) is None
    nonce, issued, mac = cookie.split(".")
    assert auth.cookie_nonce("token-one-token-one", f"{nonce}.{int(issued) + 1}.{mac}") is None


@pytest.mark.parametrize(
    ("target", "kept"),
    [
        ("/ui/sessions?q=a", "/ui/sessions?q=a"),
        ("//evil.example", "/ui"),
        ("https://evil.example/ui", "/ui"),
        ("/ui\\evil", "/ui"),
        ("/elsewhere", "/ui"),
        (None, "/ui"),
    ],
)
def test_after_login_only_inspector_pages(target: str | None, kept: str) -> None:
    assert auth.safe_next(target) == kept


def test_serve_says_where_the_inspector_is_and_never_prints_the_token(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token="a-configured-token-123")
    lines = report(settings, Probe(True, "answered"), config_file=None)
    assert f"  inspector http://127.0.0.1:{settings.port}/ui (log in with the admin token)" in lines
    assert not any("a-configured-token-123" in line for line in lines)
    off = report(
        settings.model_copy(update={"ui_enabled": False}), Probe(True, "ok"), config_file=None
    )
    assert not any("inspector" in line for line in off)
