"""Real clients' default models get their real windows, and their own compaction runs first.

Codex CLI 0.169 asks for `gpt-6.1-sol` by default (272k tokens in its catalog) and
compacts its history itself near 90% of that; Claude Code 2.1.330 asks for
`claude-opus-5-5` (200k) and auto-compacts near 167k. memlane must neither squeeze
them into a small guessed window nor summarise ahead of them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.config import Settings
from memlane.engine.governance.budget import context_window
from tests.proxy.conftest import QUIET
from tests.proxy.test_claude_code_cli import claude_binary, readme_environment
from tests.proxy.test_codex_cli import codex_binary
from tests.proxy.test_messages_governance import claude_code_history
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic, anthropic_sdk
from tests.support.upstream import ProxyFactory, ScriptedUpstream

CODEX_MODEL = "gpt-6.1-sol"
"""What `codex exec` 0.169 sends with no `--model` (checked against the real CLI)."""
CLAUDE_MODEL = "claude-opus-5-5"
"""What `claude -p` 2.1.330 sends with no `--model` (checked against the real CLI)."""

CODEX_HEADERS = {
    "user-agent": "codex_exec/0.169.0 (Debian 12; x86_64) dumb (codex_exec; 0.169.0)",
    "originator": "codex_exec",
    "session_id": "codex-window-session",
}


def codex_items(steps: int) -> list[dict[str, Any]]:
    """A Codex conversation: a prompt, then `steps` shell calls with ~1.6k-token outputs."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Read every module and summarise it."}],
        }
    ]
    for step in range(steps):
        lines = "\n".join(
            f"{step}:{n} def handler_{n}(request): return route(request)" for n in range(160)
        )
        items += [
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"cat module{step}.py"}),
                "call_id": f"call_{step}",
            },
            {"type": "function_call_output", "call_id": f"call_{step}", "output": lines},
        ]
    return items


def context(response: httpx.Response) -> dict[str, str]:
    return dict(p.split("=") for p in response.headers["x-memlane-context"].split("; "))


def test_codex_default_model_is_forwarded_uncompacted_at_100k_tokens(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    items = codex_items(steps=50)
    body = {
        "model": CODEX_MODEL,
        "instructions": "You are Codex.",
        "input": items,
        "store": False,
        "stream": False,
        "prompt_cache_key": CODEX_HEADERS["session_id"],
    }
    response = httpx.post(f"{proxy.url}/responses", json=body, headers=CODEX_HEADERS, timeout=60)

    assert response.status_code == 200, response.text
    figures = context(response)
    assert int(figures["tokens"]) > 100_000
    assert figures["compacted"] == "0"
    assert int(figures["limit"]) == 272_000 - proxy.settings.governance_safety_margin
    forwarded = upstream.last.json["input"]
    assert forwarded[: len(items)] == items  # nothing masked, dropped or summarised

    proxy.drain()
    home = str(proxy.settings.home_path)
    args = ["--home", home, "sessions", "context", CODEX_HEADERS["session_id"], "--json"]
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert (report["window"], report["window_source"]) == (272_000, "table")
    assert report["threshold"] == report["limit"]  # Codex compacts first
    assert any("codex_exec compacts its own history" in note for note in report["notes"])


@pytest.mark.parametrize(("defer", "compacted"), [(True, "0"), (False, "1")])
def test_claude_code_compacts_first_and_memlane_only_past_the_window(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    defer: bool,
    compacted: str,
) -> None:
    """170k tokens of Claude Code's default model: above memlane's own threshold (0.8 of the
    usable 196k) but below the window, where Claude Code compacts by itself; memlane leaves
    it to Claude Code unless told not to defer."""
    proxy = anthropic_proxy(governance_defer_to_clients=defer)
    system, messages = claude_code_history(turns=215, lines=40)
    claude = anthropic_sdk(
        proxy, **{"X-Claude-Code-Session-Id": "claude-window", "User-Agent": "claude-cli/2.1.330"}
    )
    response = claude.messages.with_raw_response.create(
        model=CLAUDE_MODEL, max_tokens=8_000, system=system, messages=messages
    )
    figures = context(response.http_response)  # type: ignore[arg-type]
    assert figures["compacted"] == compacted
    if defer:
        assert 0.8 * int(figures["limit"]) < int(figures["tokens"]) < int(figures["limit"])
    forwarded = anthropic_upstream.last.json["messages"]
    assert (len(forwarded) >= len(messages)) is defer


def test_the_real_clients_default_models_are_in_the_window_table(
    upstream: ScriptedUpstream, anthropic_upstream: ScriptedAnthropic, tmp_path: Path
) -> None:
    """When a new Codex or Claude Code changes its default model, this names the model the
    table must learn (the constants above are what the pinned versions send)."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    provider = (
        'model_provider = "scripted"\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{upstream.url}"\nwire_api = "responses"\n'
    )
    (home / ".codex" / "config.toml").write_text(provider, encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-default-model",
        "ANTHROPIC_API_KEY": "sk-ant-default-model",
        "ANTHROPIC_BASE_URL": anthropic_upstream.base,
        **{k: v for k, v in readme_environment().items() if k != "ANTHROPIC_BASE_URL"},
    }
    offline = ["-c", "check_for_update_on_startup=false", "-c", "features.plugins=false"]
    offline += ["-c", "analytics.enabled=false"]
    for command in (
        [str(codex_binary()), "exec", "--skip-git-repo-check", *offline, "hi"],
        [str(claude_binary()), "-p", "hi"],
    ):
        subprocess.run(
            command,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=90,
            check=False,
        )
    asked = {r.json["model"] for r in upstream.model_requests}
    asked |= {r.json["model"] for r in anthropic_upstream.message_requests}
    assert asked == {CODEX_MODEL, CLAUDE_MODEL}
    for model in asked:
        assert context_window(Settings(), None, model).source == "table", model
