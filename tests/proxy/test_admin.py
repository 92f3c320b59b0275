"""memlane's admin API under /v1/memlane/: sessions, their texts, and the admin token."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.files.paths import session_dir
from memlane.proxy.server import ServeError, check_bind
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import RunningProxy


def make_session(proxy: RunningProxy, key: str, prompt: str = "hi") -> str:
    messages: list[Any] = [{"role": "user", "content": prompt}]
    sdk(proxy, key).chat.completions.create(model="m", messages=messages)
    session = proxy.store.find_session(key)
    assert session is not None
    return str(session.id)


def test_list_show_edit_delete(mproxy: RunningProxy) -> None:
    admin = f"{mproxy.url}/memlane/sessions"
    first, second = make_session(mproxy, "one"), make_session(mproxy, "two")
    listed = httpx.get(admin, headers=mproxy.admin).json()
    assert {s["id"] for s in listed["data"]} == {first, second}
    shown = httpx.get(f"{admin}/{first}", headers=mproxy.admin).json()
    assert shown["key"] == "one"
    assert shown["message_count"] == 2
    assert (shown["summary"], shown["summarized_count"], shown["todo"]) == ("", 0, "")

    todo = httpx.put(
        f"{admin}/{first}/todo", json={"text": "write docs\\nship"}, headers=mproxy.admin
    ).json()
    assert todo["todo"] == "write docs\nship"
    pinned = httpx.put(
        f"{admin}/one/pinned", json={"text": "prod is read-only"}, headers=mproxy.admin
    ).json()
    assert pinned["pinned"] == "prod is read-only"  # a session is found by key too
    folder = session_dir(mproxy.settings.sessions_path, "one")
    assert (folder / "todo.md").read_text() == "write docs\nship"

    cleared = httpx.put(f"{admin}/{first}/todo", json={"text": None}, headers=mproxy.admin).json()
    assert cleared["todo"] == ""
    assert not (folder / "todo.md").exists()

    deleted = httpx.delete(f"{admin}/{first}", headers=mproxy.admin).json()
    assert deleted["deleted"] is True
    assert mproxy.store.get_session(first) is None
    assert not folder.exists()
    missing = httpx.get(f"{admin}/{first}", headers=mproxy.admin)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"


def test_a_repeated_delete_is_a_404_and_never_reaches_a_session_by_its_title(
    mproxy: RunningProxy,
) -> None:
    admin = f"{mproxy.url}/memlane/sessions"
    zulu = make_session(mproxy, "zulu")
    work = make_session(mproxy, "important-work", "plan the zulu launch with me")
    first = httpx.delete(f"{admin}/zulu", headers=mproxy.admin)
    assert first.json()["id"] == zulu
    # a read still finds "important-work" by its title: a delete must not
    assert httpx.get(f"{admin}/zulu", headers=mproxy.admin).json()["id"] == work
    second = httpx.delete(f"{admin}/zulu", headers=mproxy.admin)
    assert second.status_code == 404
    error = second.json()["error"]
    assert (error["type"], error["code"]) == ("not_found", "session_not_found")
    assert "memlane sessions list" in error["message"]
    for path in ("todo", "pinned"):
        put = httpx.put(f"{admin}/zulu/{path}", json={"text": "x"}, headers=mproxy.admin)
        assert put.status_code == 404, path
    assert httpx.post(f"{admin}/zulu/approve-spec", headers=mproxy.admin).status_code == 404
    assert httpx.post(f"{admin}/zulu/compact", headers=mproxy.admin).status_code == 404
    kept = mproxy.store.get_session(work)
    assert kept is not None
    assert httpx.get(f"{admin}/{work}", headers=mproxy.admin).json()["todo"] == ""


def test_bad_admin_input_is_a_422(mproxy: RunningProxy) -> None:
    session = make_session(mproxy, "x")
    response = httpx.put(
        f"{mproxy.url}/memlane/sessions/{session}/todo", json={"text": 5}, headers=mproxy.admin
    )
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "text"
    assert httpx.get(f"{mproxy.url}/memlane/nothing-here", headers=mproxy.admin).status_code == 404


def test_the_configured_admin_token_is_required(proxy_factory: Any) -> None:
    proxy = proxy_factory(admin_token="a-long-s3cret-token", **QUIET)
    url = f"{proxy.url}/memlane/sessions"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": "Bearer wrong"}).status_code == 401
    ok = httpx.get(url, headers={"authorization": "Bearer a-long-s3cret-token"})
    assert ok.status_code == 200
    assert not (proxy.settings.home_path / "admin_token").exists()  # configured: none written
    # model routes do not need it: the client's Authorization belongs to the upstream
    make_session(proxy, "k")


@pytest.mark.parametrize(
    ("host", "token", "ok"),
    [
        ("127.0.0.1", None, True),
        ("localhost", None, True),
        ("::1", None, True),
        ("0.0.0.0", None, False),
        ("192.168.1.5", "", False),
        ("0.0.0.0", "a-token-of-16-chars", True),
    ],
)
def test_non_loopback_bind_needs_a_token(host: str, token: str | None, ok: bool) -> None:
    settings = Settings(host=host, admin_token=token)
    if ok:
        check_bind(settings)
    else:
        with pytest.raises(ServeError, match="MEMLANE_ADMIN_TOKEN"):
            check_bind(settings)


def test_without_a_configured_token_one_is_generated_and_required(
    proxy_factory: Any,
) -> None:
    proxy = proxy_factory(**QUIET)
    path = proxy.settings.home_path / "admin_token"
    token = path.read_text().strip()
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # only the user can read it
    url = f"{proxy.url}/memlane/sessions"
    assert httpx.get(url).status_code == 401  # loopback too: any local page or process
    assert httpx.get(url, headers={"authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.parametrize("token", ["short", "                        ", "has spaces in it ok"])
def test_a_weak_configured_token_is_refused_at_start(token: str) -> None:
    with pytest.raises(ServeError, match="at least 16 characters"):
        check_bind(Settings(admin_token=token))


@pytest.mark.parametrize(
    "token", ["                    ", "\t  \t  \t  \t  \t  \t  ", "fifteen-chars-x"]
)
def test_serve_refuses_a_weak_token_from_the_environment_before_listening(
    token: str, tmp_path: Path
) -> None:
    args = ["--home", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "0"]
    env = {"MEMLANE_ADMIN_TOKEN": token, "OPENAI_BASE_URL": "", "MEMLANE_CONFIG": ""}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 1
    assert "at least 16 characters" in result.output
    assert "listening" not in result.output


def test_a_text_set_over_its_limit_says_where_it_was_cut(mproxy: RunningProxy) -> None:
    """As MCP `todo_set` and the inspector say it: the API's answer ended in the cut
    marker, with nothing saying so."""
    session = make_session(mproxy, "long-todo")
    url = f"{mproxy.url}/memlane/sessions/{session}"
    limit = mproxy.settings.todo_max_chars
    long = httpx.put(f"{url}/todo", json={"text": "x" * (limit + 10)}, headers=mproxy.admin)
    short = httpx.put(f"{url}/pinned", json={"text": "keep this"}, headers=mproxy.admin)
    cleared = httpx.put(f"{url}/todo", json={"text": None}, headers=mproxy.admin)

    assert long.status_code == 200, long.text
    assert long.json()["cut"] == limit
    assert (short.json()["cut"], short.json()["pinned"]) == (None, "keep this")
    assert (cleared.json()["cut"], cleared.json()["todo"]) == (None, "")
