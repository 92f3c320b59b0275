"""memlane never calls itself: a URL of its own that leads back to it stops `serve`, and a
request carrying the marker of memlane's own LLM calls is refused with 508, stored nowhere."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.proxy.guard import points_at_self, self_pointing
from memlane.proxy.headers import OWN_CALL_HEADER
from memlane.text.llm import OpenAICompatibleLLM
from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory, ScriptedUpstream


def hosts_file_name() -> str:
    """A name the hosts file maps to a loopback address (other than `localhost` if any)."""
    names = ["localhost"]
    for line in Path("/etc/hosts").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and ipaddress.ip_address(fields[0]).is_loopback:
            names += [n for n in fields[1:] if n != "localhost"]
    return names[-1]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8100/v1"),
        ("127.0.0.1", "http://localhost:8100/v1"),
        ("127.0.0.1", "http://LOCALHOST:8100"),
        ("127.0.0.1", "http://0.0.0.0:8100/v1"),
        ("127.0.0.1", "http://[::1]:8100/v1"),
        ("127.0.0.1", "http://[::ffff:127.0.0.1]:8100/v1"),
        ("127.0.0.1", "http://127.0.0.2:8100/v1"),
        ("127.0.0.1", f"http://{hosts_file_name()}:8100/v1"),
        ("localhost", "http://127.0.0.1:8100/v1"),
        ("0.0.0.0", "http://localhost:8100/v1"),
        ("0.0.0.0", "http://192.168.1.20:8100/v1"),
        ("::", "http://[::ffff:10.0.0.5]:8100/v1"),
    ],
)
def test_every_spelling_of_memlanes_own_address_is_a_loop(host: str, url: str) -> None:
    settings = Settings(host=host, port=8100)
    assert points_at_self(settings, url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8101/v1",
        "http://10.0.0.5:8100/v1",
        "http://name-that-does-not-resolve.invalid:8100/v1",
        "https://api.anthropic.com",
    ],
)
def test_other_addresses_are_no_loop(url: str) -> None:
    assert not points_at_self(Settings(host="127.0.0.1", port=8100), url)


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ("llm_base_url", "MEMLANE_LLM_BASE_URL"),
        ("summary_base_url", "MEMLANE_SUMMARY_BASE_URL"),
        ("embedding_base_url", "MEMLANE_EMBEDDING_BASE_URL"),
        ("upstream_url", "MEMLANE_UPSTREAM_URL"),
    ],
)
def test_each_own_url_is_checked_and_the_message_says_what_to_change(
    setting: str, variable: str
) -> None:
    settings = Settings(host="127.0.0.1", port=8100, **{setting: "http://[::1]:8100/v1"})
    problem = self_pointing(settings)
    assert problem is not None
    assert setting in problem
    assert variable in problem
    assert self_pointing(Settings(host="127.0.0.1", port=8100)) is None


def test_serve_refuses_an_llm_base_url_at_its_own_address(tmp_path: Path) -> None:
    env = {"OPENAI_BASE_URL": "", "MEMLANE_LLM_BASE_URL": "http://0.0.0.0:8125/v1"}
    args = ["--home", str(tmp_path), "serve", "--port", "8125", "--upstream", "http://127.0.0.1:9"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 1
    assert "MEMLANE_LLM_BASE_URL" in result.output
    assert "listening" not in result.output


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}),
        (
            "/messages",
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        ),
    ],
)
def test_a_request_carrying_the_own_call_marker_is_refused_with_508(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, path: str, body: dict[str, object]
) -> None:
    proxy = proxy_factory(**QUIET)
    response = httpx.post(
        f"{proxy.url}{path}", json=body, headers={OWN_CALL_HEADER: "1", "x-memlane-session": "s"}
    )
    assert response.status_code == 508
    error = response.json()
    if path == "/messages":  # Anthropic's error shape on its route
        assert error["type"] == "error"
        assert "memlane's own LLM calls" in error["error"]["message"]
    else:
        assert error["error"]["code"] == "own_call_loop"
    assert upstream.requests == []
    assert proxy.store.find_session("s") is None


async def test_memlanes_own_call_to_memlane_is_refused_and_stores_nothing(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    llm = OpenAICompatibleLLM(proxy.url, api_key="k", default_model="m")
    from memlane.text.llm import LLMError

    with pytest.raises(LLMError) as failed:
        await llm.complete([{"role": "user", "content": "extract facts"}])
    assert failed.value.status == 508
    assert upstream.requests == []
    assert proxy.store.list_sessions() == []
