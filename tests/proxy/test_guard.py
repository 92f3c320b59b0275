"""Trust boundaries on every route: Host, Origin, JSON bodies, forwarding loops."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.proxy.guard import VIA_VALUE, points_at_self
from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory, RunningProxy, ScriptedUpstream

CHAT = {"model": "m", "messages": [{"role": "user", "content": "spend the key"}]}


def refused(proxy: RunningProxy, upstream: ScriptedUpstream, response: httpx.Response) -> str:
    """The refusal's code, after checking nothing was stored or forwarded."""
    assert proxy.store.find_session("victim") is None
    assert upstream.requests == []
    assert "Traceback" not in response.text
    return str(response.json()["error"]["code"])


@pytest.mark.parametrize(
    "path", ["/chat/completions", "/responses", "/memlane/sessions", "/models"]
)
def test_a_foreign_host_is_refused_on_every_route(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, path: str
) -> None:
    proxy = proxy_factory(**QUIET)
    headers = {"host": "evil.example", "x-memlane-session": "victim"}
    response = httpx.post(f"{proxy.url}{path}", json=CHAT, headers=headers)
    assert response.status_code == 403
    assert refused(proxy, upstream, response) == "host_not_allowed"


def test_a_web_pages_cross_site_post_is_refused(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    headers = {"origin": "https://evil.example", "x-memlane-session": "victim"}
    response = httpx.post(f"{proxy.url}/chat/completions", json=CHAT, headers=headers)
    assert response.status_code == 403
    assert refused(proxy, upstream, response) == "origin_not_allowed"
    plain = httpx.post(
        f"{proxy.url}/chat/completions",
        content=b'{"model": "m", "messages": []}',
        headers={"content-type": "text/plain", "x-memlane-session": "victim"},
    )
    assert plain.status_code == 415
    assert refused(proxy, upstream, plain) == "unsupported_media_type"


def test_allowed_hosts_and_origins_and_same_origin_pass(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(
        **QUIET, allowed_hosts=["memlane.lan"], allowed_origins=["https://app.example"]
    )
    port = proxy.base.rsplit(":", 1)[1]
    for headers in (
        {"host": f"memlane.lan:{port}"},
        {"origin": "https://app.example"},
        {"origin": f"http://127.0.0.1:{port}"},  # memlane's own pages
        {"host": f"localhost:{port}"},
    ):
        response = httpx.post(f"{proxy.url}/chat/completions", json=CHAT, headers=headers)
        assert response.status_code == 200, (headers, response.text)


def test_a_request_that_already_went_through_this_memlane_is_refused(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    httpx.post(f"{proxy.url}/chat/completions", json=CHAT).raise_for_status()
    marker = upstream.last.headers["via"]
    assert marker == VIA_VALUE  # what memlane adds to what it forwards
    upstream.reset()
    looped = httpx.post(
        f"{proxy.url}/chat/completions",
        json=CHAT,
        headers={"via": f"1.1 other-proxy, {marker}", "x-memlane-session": "victim"},
    )
    assert looped.status_code == 508
    assert refused(proxy, upstream, looped) == "forwarding_loop"


@pytest.mark.parametrize(
    ("host", "upstream_url", "loops"),
    [
        ("127.0.0.1", "http://127.0.0.1:8100/v1", True),
        ("127.0.0.1", "http://localhost:8100/v1", True),
        ("0.0.0.0", "http://192.168.1.20:8100/v1", True),
        ("127.0.0.1", "http://127.0.0.1:11434/v1", False),
        ("127.0.0.1", "http://10.0.0.5:8100/v1", False),
    ],
)
def test_an_upstream_at_memlanes_own_address_is_a_loop(
    host: str, upstream_url: str, loops: bool
) -> None:
    settings = Settings(host=host, port=8100, upstream_url=upstream_url)
    assert points_at_self(settings, upstream_url) is loops


def test_serve_refuses_to_forward_to_itself(tmp_path: Path) -> None:
    args = ["--home", str(tmp_path), "serve", "--port", "8123"]
    result = CliRunner().invoke(
        app, [*args, "--upstream", "http://127.0.0.1:8123/v1"], env={"OPENAI_BASE_URL": ""}
    )
    assert result.exit_code == 1
    assert "memlane's own address" in result.output
    assert "listening" not in result.output


def test_serve_refuses_an_anthropic_upstream_at_its_own_address(tmp_path: Path) -> None:
    args = [
        "--home",
        str(tmp_path),
        "serve",
        "--port",
        "8124",
        "--upstream",
        "http://127.0.0.1:9/v1",
    ]
    result = CliRunner().invoke(
        app, [*args, "--anthropic-upstream", "http://localhost:8124"], env={"OPENAI_BASE_URL": ""}
    )
    assert result.exit_code == 1
    assert "MEMLANE_ANTHROPIC_UPSTREAM_URL" in result.output
    assert "listening" not in result.output


def test_serve_refuses_the_quick_starts_exported_base_url_as_its_upstream(tmp_path: Path) -> None:
    """The README exports OPENAI_BASE_URL for clients; a proxy started from that shell would
    otherwise take it as its upstream (its default) and call itself."""
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:8100/v1", "MEMLANE_CONFIG": ""}
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "serve"], env=env)
    assert result.exit_code == 1
    assert "memlane's own address" in result.output
    assert "listening" not in result.output


@pytest.mark.parametrize("path", ["/mcp", "/ui/sessions", "/ui/login"])
def test_the_mcp_server_and_the_inspector_are_behind_the_same_checks(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, path: str
) -> None:
    proxy = proxy_factory(**QUIET)
    for headers, code in (
        ({"host": "evil.example"}, "host_not_allowed"),
        ({"origin": "https://evil.example"}, "origin_not_allowed"),
    ):
        response = httpx.post(f"{proxy.base}{path}", content=b"{}", headers=headers)
        assert response.status_code == 403, (path, headers)
        assert response.json()["error"]["code"] == code
    plain = httpx.post(
        f"{proxy.base}/mcp", content=b"{}", headers={"content-type": "text/plain", **proxy.admin}
    )
    assert plain.status_code == 415
    assert upstream.requests == []
