"""`memlane init`: asks in a terminal, takes flags elsewhere, probes, writes config.toml."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from tests.cli.test_connect_agents import free_port
from tests.support.upstream import ScriptedUpstream

MEMLANE = Path(sys.executable).parent / "memlane"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("MEMLANE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    return tmp_path


def test_init_with_flags_in_ci_probes_both_upstreams_and_writes_no_key(
    home: Path, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("MY_KEY", "sk-never-written-0123")
    dead = f"http://127.0.0.1:{free_port()}"
    args = ["init", "--upstream", upstream.url, "--upstream-key-env", "MY_KEY"]
    result = CliRunner().invoke(app, [*args, "--anthropic-upstream", dead, "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["probes"]["upstream"]["models"] == list(ScriptedUpstream.MODELS)
    assert report["probes"]["anthropic"]["ok"] is False
    assert upstream.last.headers["authorization"] == "Bearer sk-never-written-0123"
    text = (home / "config.toml").read_text(encoding="utf-8")
    assert f'upstream_url = "{upstream.url}"' in text
    assert 'upstream_api_key_env = "MY_KEY"' in text
    assert f'anthropic_upstream_url = "{dead}"' in text
    assert "sk-never" not in text

    shown = CliRunner().invoke(app, ["config", "show", "--json"])
    settings = json.loads(shown.stdout)["settings"]
    assert settings["upstream_url"]["source"].startswith("file ")
    assert settings["upstream_api_key"]["source"] == "env MY_KEY"


def test_init_asks_in_a_terminal_and_offers_the_models_found(
    home: Path, upstream: ScriptedUpstream
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "CI"))}
    env.update({"MEMLANE_HOME": str(home), "TERM": "dumb"})
    child = pexpect.spawn(str(MEMLANE), ["init"], env=env, encoding="utf-8", timeout=60)
    child.expect_exact("OpenAI-compatible upstream")
    child.sendline(upstream.url)
    child.expect_exact("variable holding its key")
    child.sendline("")
    child.expect_exact("Anthropic upstream")
    child.sendline(f"http://127.0.0.1:{free_port()}")
    child.expect_exact("variable holding its key")
    child.sendline("")
    child.expect_exact("models: scripted-small, scripted-large")
    child.expect_exact("[scripted-small]")
    child.sendline("scripted-large")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    text = (home / "config.toml").read_text(encoding="utf-8")
    assert 'llm_model = "scripted-large"' in text
    assert f'upstream_url = "{upstream.url}"' in text


def test_init_without_a_terminal_asks_nothing_and_writes_what_it_has(
    home: Path, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("MEMLANE_UPSTREAM_URL", upstream.url)
    monkeypatch.setenv("MEMLANE_ANTHROPIC_UPSTREAM_URL", f"http://127.0.0.1:{free_port()}")
    result = CliRunner().invoke(app, ["init"], input="")  # stdin is no terminal: no prompt
    assert result.exit_code == 0, result.output
    assert "models: scripted-small, scripted-large" in result.stdout
    assert "?" not in result.stdout.split("models:")[0]  # no question was put
    assert f'upstream_url = "{upstream.url}"' in (home / "config.toml").read_text()
