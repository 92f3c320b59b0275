"""Session key, namespace and client detection, and keys that must never become paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane.proxy.identity import (
    MAX_KEY_CHARS,
    IdentityError,
    bounded,
    header_text,
    is_agentic,
    resolve,
)
from memlane.types import Message
from tests.support.upstream import RunningProxy


def key_of(headers: dict[str, str], body: dict[str, Any] | None = None) -> str:
    return resolve(headers, body or {}).key


def test_session_key_order() -> None:
    body = {"prompt_cache_key": "pck", "metadata": {"session_id": "meta"}, "session_id": "top"}
    headers = {"x-memlane-session": "mine", "x-session-id": "generic"}
    assert key_of(headers, body) == "mine"
    assert key_of({"x-session-id": "generic"}, body) == "generic"
    assert key_of({}, body) == "pck"
    assert key_of({}, {"metadata": {"session_id": "meta"}, "session_id": "top"}) == "meta"
    assert key_of({}, {"session_id": "top"}) == "top"
    assert key_of({}, {"prompt_cache_key": "  ", "session_id": 7}).startswith("anon-")


def test_fallback_key_hashes_authorization_and_user_agent() -> None:
    a = key_of({"authorization": "Bearer sk-secret-1", "user-agent": "x"})
    b = key_of({"authorization": "Bearer sk-secret-2", "user-agent": "x"})
    assert a != b
    assert a == key_of({"authorization": "Bearer sk-secret-1", "user-agent": "x"})
    assert "secret" not in a


def test_namespace_order() -> None:
    def ns(headers: dict[str, str], body: dict[str, Any] | None = None) -> str:
        return resolve({"x-memlane-session": "s", **headers}, body or {}).namespace

    all_headers = {
        "x-memlane-repo": "r1",
        "x-repo-path": "r2",
        "x-workspace-root": "r3",
        "x-project-root": "r4",
    }
    assert ns(all_headers) == "r1"
    assert ns({"x-workspace-root": "r3", "x-project-root": "r4"}) == "r3"
    assert ns({}, {"metadata": {"repo": "/src/app"}}) == "/src/app"
    assert ns({}) == "default"  # the tenant's sessions with no project share one namespace
    with pytest.raises(IdentityError, match="may not start with"):
        ns({"x-memlane-repo": "session:other"})
    with pytest.raises(IdentityError, match="sessions that name no project"):
        ns({"x-memlane-repo": "Default"})


def test_isolated_sessions_without_a_project_keep_a_namespace_of_their_own() -> None:
    identity = resolve({"x-memlane-session": "s"}, {}, without_project="isolated")
    assert identity.namespace == "session:s"  # never a repo called "s"


def test_the_project_the_client_works_in_is_the_namespace(tmp_path: Path) -> None:
    """A folder the agent names: its repository's root path, unless a header names one."""
    repo = tmp_path / "api"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    context = f"<environment_context>\n  <cwd>{repo / 'src'}</cwd>\n</environment_context>"
    messages = [Message("user", context), Message("user", "hi")]

    def ns(headers: dict[str, str]) -> str:
        return resolve({"x-memlane-session": "s", **headers}, {}, messages).namespace

    assert ns({}) == str(repo.resolve())
    assert ns({"x-memlane-repo": "chosen"}) == "chosen"
    elsewhere = [Message("user", context.replace(str(tmp_path), "/not/here")), messages[1]]
    assert resolve({}, {}, elsewhere).namespace == "/not/here/api/src"
    assert resolve({}, {}, [Message("user", "hi")]).namespace == "default"


@pytest.mark.parametrize(
    ("headers", "agentic"),
    [
        ({"user-agent": "codex_cli_rs/0.169.0 (Debian 12)"}, True),
        ({"originator": "codex_cli_rs", "user-agent": "reqwest"}, True),
        ({"user-agent": "factory-cli/1.2"}, True),
        ({"user-agent": "droid/0.9"}, True),
        ({"user-agent": "Warp/2025.1"}, True),
        ({"user-agent": "curl/8", "x-stainless-lang": "js"}, True),
        ({"user-agent": "Mozilla/5.0 (Linux; Android 14)"}, False),
        ({"user-agent": "open-webui"}, False),
        ({}, False),
    ],
)
def test_agentic_clients(headers: dict[str, str], agentic: bool) -> None:
    assert is_agentic(headers) is agentic


def test_flags_and_ephemeral() -> None:
    identity = resolve({"x-memlane-ephemeral": "TRUE", "x-memlane-todo": "t"}, {})
    assert identity.ephemeral
    assert identity.flags == {"ephemeral": "TRUE", "todo": "t"}


def test_long_or_control_keys_are_hashed() -> None:
    assert bounded("normal-key") == "normal-key"
    long = bounded("k" * (MAX_KEY_CHARS + 1))
    assert long.startswith("sha256:")
    assert len(long) == 71
    assert bounded("a\nb").startswith("sha256:")


def test_utf8_sent_in_headers_is_recovered() -> None:
    assert header_text("fix — now".encode().decode("latin-1")) == "fix — now"
    assert header_text("plain") == "plain"


@pytest.mark.parametrize(
    "key",
    ["../../etc", "/etc/passwd", "..", "a/../../b", "~root", "C:\\Windows", "%2e%2e%2f" * 3],
)
def test_hostile_keys_stay_inside_the_home(mproxy: RunningProxy, key: str) -> None:
    assert_contained(mproxy, key)


def test_ten_kilobytes_of_junk_stay_inside_the_home(mproxy: RunningProxy) -> None:
    junk = "".join(chr(33 + (i * 7919) % 94) for i in range(10_000))
    assert_contained(mproxy, junk)


def assert_contained(proxy: RunningProxy, key: str) -> None:
    home = Path(proxy.settings.home_path).resolve()
    sessions = home / "sessions"
    before = {p for p in home.parent.iterdir()}
    headers = {"x-memlane-todo": "keep this", "user-agent": "codex_cli_rs/1"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "prompt_cache_key": key}
    response = httpx.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
    assert response.status_code == 200
    assert {p for p in home.parent.iterdir()} == before
    proxy.settled()  # the scaffold's files are written once the turn is stored
    todo_files = list(home.rglob("todo.md"))
    assert len(todo_files) == 1
    assert todo_files[0].parent.parent == sessions
    assert todo_files[0].read_text() == "keep this"
    [session] = proxy.store.list_sessions()
    assert len(session.key) <= 200


def test_headers_are_read_by_their_first_value_whatever_the_case() -> None:
    from starlette.datastructures import Headers

    from memlane.proxy.headers import first_values

    raw = [
        (b"x-memlane-session", b"first"),
        (b"user-agent", b"codex_cli_rs/0.1"),
        (b"x-memlane-session", b"second"),
    ]
    sent = first_values(Headers(raw=raw))
    assert sent == {"x-memlane-session": "first", "user-agent": "codex_cli_rs/0.1"}
    assert resolve(sent, {}).key == Headers(raw=raw).get("X-Memlane-Session") == "first"
