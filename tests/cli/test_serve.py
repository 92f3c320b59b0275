"""`memlane serve` refuses what it must refuse, with a one-line error and no traceback."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.upstream import ScriptedUpstream


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    args = ["--home", str(tmp_path), "serve", "--host", "0.0.0.0"]
    result = CliRunner().invoke(app, args, env={"MEMLANE_ADMIN_TOKEN": ""})
    assert result.exit_code == 1
    assert "MEMLANE_ADMIN_TOKEN" in result.output
    assert "Traceback" not in result.output


def test_serve_rejects_an_unknown_scaffold_clients_value(tmp_path: Path) -> None:
    args = ["--home", str(tmp_path), "serve", "--scaffold-clients", "robots"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "scaffold_clients" in result.output


def _serve(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))},
        "MEMLANE_HOME": str(home),
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        # the start-up probes both upstreams: never the real Anthropic API from a test
        "MEMLANE_ANTHROPIC_UPSTREAM_URL": f"http://127.0.0.1:{_free_port()}",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "memlane.cli", "serve", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _lines_until(process: subprocess.Popen[str], marker: str) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    raise AssertionError("serve ended before printing " + repr(marker) + ": " + "\n".join(lines))


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_reports_the_upstream_probe_store_and_config(
    tmp_path: Path, upstream: ScriptedUpstream, anthropic_upstream: ScriptedAnthropic
) -> None:
    port = _free_port()
    anthropic = ("--anthropic-upstream", anthropic_upstream.base)
    process = _serve(tmp_path, "--port", str(port), "--upstream", upstream.url, *anthropic)
    try:
        lines = _lines_until(process, "export OPENAI_BASE_URL")
        text = "\n".join(lines)
        assert f"listening on http://127.0.0.1:{port}/v1" in text
        assert f"upstream  {upstream.url} answered" in text
        assert f"anthropic {anthropic_upstream.base} answered" in text
        assert str(tmp_path / "memlane.db") in text
        assert str(tmp_path / "config.toml") in text
        assert "warning" not in text
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    finally:
        _stop(process)


def test_serve_warns_with_the_fix_when_the_upstream_is_down(tmp_path: Path) -> None:
    port = _free_port()
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    process = _serve(tmp_path, "--port", str(port), "--upstream", dead)
    try:
        lines = _lines_until(process, "warning:")
        assert "not reachable" in lines[-1]
        assert "MEMLANE_UPSTREAM_URL" in lines[-1]
        # a warning, not a failure: the proxy serves
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    finally:
        _stop(process)


def test_a_port_in_use_is_one_line_and_no_listening_claim(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _serve(tmp_path, "--port", str(port), "--upstream", "http://127.0.0.1:9/v1")
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "listening" not in out
    assert f"cannot listen on 127.0.0.1:{port}" in out
    assert "--port" in out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--host", "127.0.0.999"), "not an IP address or a name this machine resolves"),
        (("--upstream", "127.0.0.1:11434/v1"), "is not an http(s) URL"),
    ],
)
def test_bad_address_or_upstream_is_named(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "serve", *args])
    assert result.exit_code == 1
    assert fragment in result.output
    assert "MEMLANE_ADMIN_TOKEN" not in result.output
    assert "Traceback" not in result.output


def test_status_reports_the_running_proxy_then_its_absence(
    tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    runner = CliRunner()
    port = _free_port()
    process = _serve(tmp_path, "--port", str(port), "--upstream", upstream.url)
    try:
        _lines_until(process, "export OPENAI_BASE_URL")
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "I prefer tabs"}]},
            headers={"X-Memlane-Session": "s1"},
            timeout=30,
        )
        assert answer.status_code == 200
        result = runner.invoke(app, ["--home", str(tmp_path), "status", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["running"] is True
        assert report["url"] == f"http://127.0.0.1:{port}"
        assert report["upstream_url"] == upstream.url
        assert report["requests_last_hour"] >= 1
        assert report["sessions"] == 1
        assert report["cpu_seconds"]["process"] > 0  # and each part's (`proxy.cpu`)
        table = runner.invoke(app, ["--home", str(tmp_path), "status"]).stdout
        assert "requests" in table
        assert "1 sessions" in table
        assert re.search(r"cpu +[\d.]+ s since start: .*event loop [\d.]+", table), table
    finally:
        _stop(process)
    after = runner.invoke(app, ["--home", str(tmp_path), "status", "--json"])
    stopped = json.loads(after.stdout)
    assert (stopped["running"], stopped["sessions"]) == (False, 1)
    assert "no proxy is running" in runner.invoke(app, ["--home", str(tmp_path), "status"]).stdout
