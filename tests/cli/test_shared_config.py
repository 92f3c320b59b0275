"""Every command reads one configuration, and finds a running proxy's upstream.

`memlane serve --upstream URL` writes `serve.json`; a `memlane chat` in another
terminal, with no flag and no config file, talks to the same upstream, with the first
model it lists. A configured upstream still wins over the running one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.cli.test_chat import MEMLANE, default_ctrl_c, leave, say
from tests.cli.test_connect_agents import free_port
from tests.support.upstream import Reply, ScriptedUpstream


@pytest.fixture
def env(tmp_path: Path, upstream: ScriptedUpstream) -> dict[str, str]:
    upstream.respond_with(lambda r: None if r.json.get("stream") else Reply(text="[]"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))}
    return {
        **base,
        "MEMLANE_HOME": str(tmp_path / "home"),
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        "TERM": "dumb",
    }


@pytest.fixture
def serving(env: dict[str, str], upstream: ScriptedUpstream) -> Iterator[subprocess.Popen[bytes]]:
    """`memlane serve --upstream <scripted>` on a free port, until the test ends."""
    home = Path(env["MEMLANE_HOME"])
    command = [str(MEMLANE), "serve", "--upstream", upstream.url, "--port", str(free_port())]
    server = subprocess.Popen(
        command,
        env={**env, "MEMLANE_ANTHROPIC_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (home / "serve.json").exists():
        assert server.poll() is None, "memlane serve stopped at start"
        assert time.monotonic() < deadline, "memlane serve did not start within 60 s"
        time.sleep(0.1)
    yield server
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)


def chat(env: dict[str, str]) -> pexpect.spawn:
    return pexpect.spawn(
        str(MEMLANE),
        ["chat"],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
        preexec_fn=default_ctrl_c,
    )


def test_chat_with_no_flags_talks_to_the_running_proxys_upstream(
    env: dict[str, str], upstream: ScriptedUpstream, serving: subprocess.Popen[bytes]
) -> None:
    served = json.loads((Path(env["MEMLANE_HOME"]) / "serve.json").read_text(encoding="utf-8"))
    assert served["upstream_url"] == upstream.url
    child = chat(env)
    child.expect_exact("new chat with scripted-small")  # the first model the upstream lists
    say(child, "hello there", "assistant> echo: hello there")
    leave(child)
    assert [r.json["model"] for r in upstream.model_requests if r.json.get("stream")] == [
        "scripted-small"
    ]

    shown = subprocess.run(
        [str(MEMLANE), "config", "show", "--json"], env=env, capture_output=True, text=True
    )
    upstream_url = json.loads(shown.stdout)["settings"]["upstream_url"]
    assert upstream_url == {"value": upstream.url, "source": "running proxy (serve.json)"}

    configured = {**env, "MEMLANE_UPSTREAM_URL": "http://127.0.0.1:9/v1"}
    shown = subprocess.run(
        [str(MEMLANE), "config", "show", "--json"], env=configured, capture_output=True, text=True
    )
    assert json.loads(shown.stdout)["settings"]["upstream_url"]["value"] == "http://127.0.0.1:9/v1"
