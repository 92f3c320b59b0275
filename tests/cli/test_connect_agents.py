"""`memlane connect` with the real Codex CLI and Claude Code, in temporary homes.

Each agent starts with a configuration of its own that goes straight to a scripted
upstream. After `memlane connect` its next run goes through memlane (the proxy stores
the turn) and `codex mcp list` / `claude mcp list` list memlane's MCP server by the
absolute path of the installed command; after `memlane connect … --remove` the file
is back as it was and the agent goes straight to the upstream again (memlane stores
nothing new, and the MCP server is gone).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memlane.config import Settings
from memlane.store import Store, open_store
from tests.proxy.conftest import QUIET
from tests.proxy.test_claude_code_cli import API_KEY as CLAUDE_KEY
from tests.proxy.test_claude_code_cli import claude_binary, readme_environment
from tests.proxy.test_codex_cli import NetworkTrap, codex_binary
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic
from tests.support.upstream import ProxyFactory, RunningProxy, ScriptedUpstream

MEMLANE = Path(sys.executable).parent / "memlane"
AGENT_TIMEOUT = 90.0
CODEX_OFFLINE = [
    "-c",
    "check_for_update_on_startup=false",
    "-c",
    "features.plugins=false",
    "-c",
    "analytics.enabled=false",
]


@pytest.fixture
def trap() -> Iterator[NetworkTrap]:
    running = NetworkTrap()
    yield running
    running.close()


def agent_env(tmp_path: Path, trap: NetworkTrap, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "MEMLANE_HOME": str(tmp_path / "memlane"),
        **extra,
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = trap.url
    return env


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"{command[:3]} failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    )
    return result


def memlane_connect(
    agent: str, proxy: RunningProxy, env: dict[str, str], cwd: Path, *flags: str
) -> str:
    port = str(urlsplit(proxy.base).port)
    return run([str(MEMLANE), "connect", agent, *flags], {**env, "MEMLANE_PORT": port}, cwd).stdout


def stored_sessions(proxy: RunningProxy) -> int:
    proxy.drain()
    return len(proxy.store.list_sessions())


def test_codex_goes_through_memlane_after_connect_and_not_after_remove(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, trap: NetworkTrap, tmp_path: Path
) -> None:
    proxy = proxy_factory(**QUIET)
    codex = str(codex_binary())
    env = agent_env(tmp_path, trap, OPENAI_API_KEY="sk-codex-connect")
    codex_home = Path(env["HOME"]) / ".codex"
    codex_home.mkdir()
    env["CODEX_HOME"] = str(codex_home)
    config = codex_home / "config.toml"
    original = (
        '# my own provider\nmodel_provider = "direct"\n\n[model_providers.direct]\n'
        f'name = "direct"\nbase_url = "{upstream.url}"\nwire_api = "responses"\n'
    )
    config.write_text(original, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    exec_ = [codex, "exec", "--skip-git-repo-check", f"--cd={work}", *CODEX_OFFLINE]

    dry = memlane_connect("codex", proxy, env, work, "--dry-run")
    assert '+model_provider = "memlane"' in dry
    assert config.read_text(encoding="utf-8") == original  # shown, not written

    said = memlane_connect("codex", proxy, env, work)
    assert f"changed {config}" in said
    assert "already connected" in memlane_connect("codex", proxy, env, work)  # idempotent
    listed = run([codex, "mcp", "list"], env, work).stdout
    assert "memlane" in listed
    assert str(MEMLANE) in listed
    run([*exec_, "first through memlane"], env, work)
    assert stored_sessions(proxy) == 1
    assert len(upstream.model_requests) == 1

    memlane_connect("codex", proxy, env, work, "--remove")
    assert config.read_text(encoding="utf-8") == original
    assert "memlane" not in run([codex, "mcp", "list"], env, work).stdout
    run([*exec_, "then straight to the upstream"], env, work)
    assert len(upstream.model_requests) == 2
    assert stored_sessions(proxy) == 1  # memlane saw nothing of it
    assert trap.attempts == []


def test_claude_code_goes_through_memlane_after_connect_and_not_after_remove(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    trap: NetworkTrap,
    tmp_path: Path,
) -> None:
    proxy = anthropic_proxy()
    claude = str(claude_binary())
    quiet = {k: v for k, v in readme_environment().items() if k != "ANTHROPIC_BASE_URL"}
    env = agent_env(tmp_path, trap, ANTHROPIC_API_KEY=CLAUDE_KEY, **quiet)
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps({"env": {"ANTHROPIC_BASE_URL": anthropic_upstream.base}}) + "\n"
    settings.write_text(original, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    ask = [claude, "-p", "--model", "claude-scripted"]

    said = memlane_connect("claude", proxy, env, work)
    assert f"changed {settings}" in said
    assert f"changed {Path(env['HOME']) / '.claude.json'}" in said
    assert json.loads(settings.read_text(encoding="utf-8"))["env"] == {
        "ANTHROPIC_BASE_URL": proxy.base
    }
    assert "already connected" in memlane_connect("claude", proxy, env, work)
    listed = run([claude, "mcp", "list"], env, work).stdout
    assert "memlane" in listed
    assert str(MEMLANE) in listed
    run([*ask, "first through memlane"], env, work)
    assert stored_sessions(proxy) == 1
    through = len(anthropic_upstream.message_requests)
    assert through >= 1

    memlane_connect("claude", proxy, env, work, "--remove")
    assert settings.read_text(encoding="utf-8") == original
    assert not (settings.parent / "memlane-connect.json").exists()
    assert "memlane" not in run([claude, "mcp", "list"], env, work).stdout
    run([*ask, "then straight to the upstream"], env, work)
    assert len(anthropic_upstream.message_requests) > through
    assert stored_sessions(proxy) == 1


def serve_file_for(proxy: RunningProxy, home: Path, upstream_url: str) -> None:
    """What `memlane serve` writes, for the proxy this test runs in-process."""
    home.mkdir(parents=True, exist_ok=True)
    data = {"pid": os.getpid(), "url": proxy.base, "upstream_url": upstream_url}
    (home / "serve.json").write_text(json.dumps(data), encoding="utf-8")


def test_memlane_run_codex_goes_through_the_running_proxy_and_touches_no_file(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, trap: NetworkTrap, tmp_path: Path
) -> None:
    proxy = proxy_factory(**QUIET)
    codex = codex_binary()
    env = agent_env(tmp_path, trap, OPENAI_API_KEY="sk-codex-run")
    env["PATH"] = f"{codex.parent}{os.pathsep}{env['PATH']}"
    serve_file_for(proxy, Path(env["MEMLANE_HOME"]), upstream.url)
    work = tmp_path / "work"
    work.mkdir()
    before = sorted(p for p in Path(env["HOME"]).rglob("*") if p.is_file())

    args = ["exec", "--skip-git-repo-check", "--ephemeral", f"--cd={work}", *CODEX_OFFLINE]
    result = run([str(MEMLANE), "run", "codex", *args, "through memlane"], env, work)

    assert "echo: through memlane" in result.stdout
    assert stored_sessions(proxy) == 1
    assert upstream.model_requests[0].headers["authorization"] == "Bearer sk-codex-run"
    after = sorted(p for p in Path(env["HOME"]).rglob("*") if p.is_file())
    assert not [p for p in after if p not in before and p.name == "config.toml"]
    assert trap.attempts == []


@contextlib.contextmanager
def opened(settings: Settings) -> Iterator[Store]:
    store = open_store(settings)
    try:
        yield store
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_memlane_run_starts_a_proxy_in_the_background_when_none_runs(
    upstream: ScriptedUpstream, trap: NetworkTrap, tmp_path: Path
) -> None:
    codex = codex_binary()
    env = agent_env(
        tmp_path,
        trap,
        OPENAI_API_KEY="sk-codex-run",
        MEMLANE_UPSTREAM_URL=upstream.url,
        MEMLANE_ANTHROPIC_UPSTREAM_URL=f"http://127.0.0.1:{free_port()}",
        MEMLANE_PORT=str(free_port()),
        MEMLANE_MEMORY_ENABLED="false",
    )
    env["PATH"] = f"{codex.parent}{os.pathsep}{env['PATH']}"
    home = Path(env["MEMLANE_HOME"])
    work = tmp_path / "work"
    work.mkdir()
    args = ["exec", "--skip-git-repo-check", "--ephemeral", f"--cd={work}", *CODEX_OFFLINE]
    try:
        result = run([str(MEMLANE), "run", "codex", *args, "through a new proxy"], env, work)
        assert "echo: through a new proxy" in result.stdout
        assert "starting the proxy" in result.stderr
        served = json.loads((home / "serve.json").read_text(encoding="utf-8"))
        assert served["url"] == f"http://127.0.0.1:{env['MEMLANE_PORT']}"
    finally:
        stop_serve(home)
    with opened(Settings(home=home)) as store:
        assert len(store.list_sessions()) == 1


def stop_serve(home: Path) -> None:
    """Stop the `memlane serve` the command started (by the pid it wrote), and wait."""
    try:
        pid = int(json.loads((home / "serve.json").read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (home / "serve.json").exists():
        time.sleep(0.1)


def test_memlane_run_claude_goes_through_the_running_proxy_and_touches_no_file(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    trap: NetworkTrap,
    tmp_path: Path,
) -> None:
    proxy = anthropic_proxy()
    claude = claude_binary()
    quiet = {k: v for k, v in readme_environment().items() if k != "ANTHROPIC_BASE_URL"}
    env = agent_env(tmp_path, trap, ANTHROPIC_API_KEY=CLAUDE_KEY, **quiet)
    env["PATH"] = f"{claude.parent}{os.pathsep}{env['PATH']}"
    serve_file_for(proxy, Path(env["MEMLANE_HOME"]), "")
    work = tmp_path / "work"
    work.mkdir()

    ask = ["-p", "--model", "claude-scripted", "through memlane"]
    result = run([str(MEMLANE), "run", "claude", *ask], env, work)

    assert result.stdout.startswith("echo: ")  # the scripted upstream's answer, through
    assert result.stdout.strip().endswith("through memlane")
    assert stored_sessions(proxy) == 1
    assert anthropic_upstream.message_requests[-1].headers["x-api-key"] == CLAUDE_KEY
    body = anthropic_upstream.message_requests[-1].body.decode()
    # memlane's MCP server, started from --mcp-config: its tools are offered (deferred)
    assert "mcp__memlane__memory_search" in body
    assert not (Path(env["HOME"]) / ".claude" / "settings.json").exists()
    assert trap.attempts == []


def test_memlane_run_claude_warns_at_once_when_the_anthropic_upstream_is_down(
    anthropic_proxy: AnthropicProxy, trap: NetworkTrap, tmp_path: Path
) -> None:
    proxy = anthropic_proxy()
    claude = claude_binary()
    env = agent_env(tmp_path, trap)
    env["PATH"] = f"{claude.parent}{os.pathsep}{env['PATH']}"
    home = Path(env["MEMLANE_HOME"])
    home.mkdir()
    dead = f"http://127.0.0.1:{free_port()}"
    served = {"pid": os.getpid(), "url": proxy.base, "anthropic_upstream_url": dead}
    (home / "serve.json").write_text(json.dumps(served), encoding="utf-8")

    result = run([str(MEMLANE), "run", "claude", "--version"], env, tmp_path)

    assert "(Claude Code)" in result.stdout  # the agent still starts
    assert f"the proxy's Anthropic upstream {dead} is not reachable" in result.stderr
    assert "--anthropic-upstream" in result.stderr
