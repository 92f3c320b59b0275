"""memlane's admin API under /v1/memlane/: sessions, their texts, and the admin token."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memlane.config import Settings
from memlane.files.paths import session_dir
from memlane.proxy.server import ServeError, check_bind
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import RunningProxy


def make_session(proxy: RunningProxy, key: str) -> str:
    sdk(proxy, key).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    session = proxy.store.find_session(key)
    assert session is not None
    return str(session.id)


def test_list_show_edit_delete(mproxy: RunningProxy) -> None:
    admin = f"{mproxy.url}/memlane/sessions"
    first, second = make_session(mproxy, "one"), make_session(mproxy, "two")
    listed = httpx.get(admin).json()
    assert {s["id"] for s in listed["data"]} == {first, second}
    shown = httpx.get(f"{admin}/{first}").json()
    assert shown["key"] == "one"
    assert shown["message_count"] == 2
    assert (shown["summary"], shown["summarized_count"], shown["todo"]) == ("", 0, "")

    todo = httpx.put(f"{admin}/{first}/todo", json={"text": "write docs\\nship"}).json()
    assert todo["todo"] == "write docs\nship"
    pinned = httpx.put(f"{admin}/one/pinned", json={"text": "prod is read-only"}).json()
    assert pinned["pinned"] == "prod is read-only"  # a session is found by key too
    folder = session_dir(mproxy.settings.sessions_path, "one")
    assert (folder / "todo.md").read_text() == "write docs\nship"

    cleared = httpx.put(f"{admin}/{first}/todo", json={"text": None}).json()
    assert cleared["todo"] == ""
    assert not (folder / "todo.md").exists()

    deleted = httpx.delete(f"{admin}/{first}").json()
    assert deleted["deleted"] is True
    assert mproxy.store.get_session(first) is None
    assert not folder.exists()
    missing = httpx.get(f"{admin}/{first}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"


def test_bad_admin_input_is_a_422(mproxy: RunningProxy) -> None:
    session = make_session(mproxy, "x")
    response = httpx.put(f"{mproxy.url}/memlane/sessions/{session}/todo", json={"text": 5})
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "text"
    assert httpx.get(f"{mproxy.url}/memlane/nothing-here").status_code == 404


def test_the_admin_token_is_required_when_set(proxy_factory: Any) -> None:
    proxy = proxy_factory(admin_token="s3cret", **QUIET)
    url = f"{proxy.url}/memlane/sessions"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(url, headers={"authorization": "Bearer s3cret"}).status_code == 200
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
        ("0.0.0.0", "tok", True),
    ],
)
def test_non_loopback_bind_needs_a_token(host: str, token: str | None, ok: bool) -> None:
    settings = Settings(host=host, admin_token=token)
    if ok:
        check_bind(settings)
    else:
        with pytest.raises(ServeError, match="MEMLANE_ADMIN_TOKEN"):
            check_bind(settings)
