"""`memlane doctor` explains recorded failures with their fix."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.engine.failopen import EVENT
from memlane.store.sqlite import SQLiteStore
from tests.cli.test_connect_agents import free_port
from tests.proxy.conftest import QUIET
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.upstream import Fail, ProxyFactory, Reply, ScriptedUpstream


@pytest.fixture
def runner(
    upstream: ScriptedUpstream,
    anthropic_upstream: ScriptedAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> CliRunner:
    """Both upstreams answer (doctor probes them), and nothing beyond loopback is asked."""
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "MEMLANE_UPSTREAM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMLANE_UPSTREAM_URL", upstream.url)
    monkeypatch.setenv("MEMLANE_ANTHROPIC_UPSTREAM_URL", anthropic_upstream.base)
    return CliRunner()


def test_doctor_groups_failures_and_says_what_to_do(tmp_path: Path, runner: CliRunner) -> None:
    assert "nothing has failed" in runner.invoke(app, ["--home", str(tmp_path), "doctor"]).stdout
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    for _ in range(2):
        store.add_event(
            session.id, EVENT, {"stage": "recall", "type": "TimeoutError", "error": "took 80 ms"}
        )
    store.add_event(session.id, EVENT, {"stage": "scaffold", "type": "OSError", "error": "denied"})
    store.close()
    result = runner.invoke(app, ["--home", str(tmp_path), "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["proxy_running"] is False
    first, second = report["problems"]
    assert (first["stage"], first["type"], first["count"]) == ("recall", "TimeoutError", 2)
    assert "MEMLANE_RECALL_DEADLINE_MS" in first["advice"]
    assert (second["stage"], second["count"], second["last_error"]) == ("scaffold", 1, "denied")
    table = runner.invoke(app, ["--home", str(tmp_path), "doctor"]).stdout
    assert "recall failed 2×" in table
    assert "fix:" in table


def test_a_home_that_is_not_there_is_a_failed_check_and_is_not_created(
    tmp_path: Path, runner: CliRunner
) -> None:
    typo = tmp_path / ".memlan"
    result = runner.invoke(app, ["--home", str(typo), "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    first = report["problems"][0]
    assert (first["stage"], first["type"]) == ("store", "missing")
    assert first["last_error"] == f"no memlane home at {typo} (from --home)"
    assert "`memlane serve` or `memlane init`" in first["advice"]
    assert [u["ok"] for u in report["upstreams"]] == [True, True]  # the rest is still checked
    table = runner.invoke(app, ["--home", str(typo), "doctor"]).stdout
    assert "store failed 1× (missing)" in table
    assert not typo.exists()


def test_doctor_names_a_dead_anthropic_upstream_and_how_to_fix_it(
    tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MEMLANE_ANTHROPIC_UPSTREAM_URL", dead)
    monkeypatch.setenv("MEMLANE_ANTHROPIC_API_KEY", "sk-ant-never-printed-0123")
    result = runner.invoke(app, ["--home", str(tmp_path), "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    anthropic = next(u for u in report["upstreams"] if u["name"] == "anthropic")
    assert (anthropic["url"], anthropic["ok"]) == (dead, False)
    assert anthropic["key"] == "set (env MEMLANE_ANTHROPIC_API_KEY)"
    [problem] = report["problems"]
    assert problem["stage"] == "anthropic"
    assert f"the Anthropic upstream {dead} is not reachable" in problem["last_error"]
    assert "memlane config set anthropic_upstream_url URL" in problem["advice"]
    assert "--anthropic-upstream" in problem["advice"]

    text = runner.invoke(app, ["--home", str(tmp_path), "doctor"]).stdout
    assert f"the Anthropic upstream {dead} is not reachable" in text
    assert "fix: start it" in text
    assert "sk-ant-never" not in text + result.stdout


def test_doctor_reads_upstream_errors_and_windows_of_recent_turns_from_the_store(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, runner: CliRunner
) -> None:
    """What another process (the proxy) met, read by doctor from the store alone."""
    proxy = proxy_factory(**QUIET)
    upstream.script(
        Reply(text="fine"),
        Fail(401, "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"),
        Fail(401, "Incorrect API key provided"),
    )
    client = httpx.Client(base_url=proxy.url, headers={"x-memlane-session": "doc"}, timeout=30)
    for model in ("gpt-6.1-sol", "someones-finetune", "someones-finetune"):
        body = {"model": model, "messages": [{"role": "user", "content": f"hello {model}"}]}
        client.post("/chat/completions", json=body)
    client.close()
    proxy.drain()

    result = runner.invoke(app, ["--home", str(proxy.settings.home_path), "doctor", "--json"])
    report = json.loads(result.stdout)
    windows = {w["model"]: (w["window"], w["source"]) for w in report["windows"]}
    assert windows == {"gpt-6.1-sol": (272_000, "table"), "someones-finetune": (131_072, "default")}
    errors = [p for p in report["problems"] if p["stage"] == "upstream"]
    assert [(p["type"], p["count"]) for p in errors] == [("401", 2)]
    assert errors[0]["last_error"].startswith(f"{upstream.url} answered 401")
    assert "upstream_api_key_env" in errors[0]["advice"]
    assert "abcdefghijklmnop" not in result.stdout  # the echoed key is redacted
    unknown = [p for p in report["problems"] if p["type"] == "unknown window"]
    assert "governance_context_windows someones-finetune=TOKENS" in unknown[0]["advice"]


def test_a_request_that_went_on_without_memlanes_work_is_explained(
    tmp_path: Path, runner: CliRunner
) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    store.add_event(
        session.id,
        EVENT,
        {"stage": "wait", "type": "TimeoutError", "error": "storing the answer took too long"},
    )
    store.close()
    result = runner.invoke(app, ["--home", str(tmp_path), "doctor", "--json"])
    (problem,) = json.loads(result.stdout)["problems"]
    assert "MEMLANE_REQUEST_WAIT_SECONDS" in problem["advice"]


def test_a_file_system_failure_is_told_to_check_the_files_not_the_model() -> None:
    from memlane.cli.doctor import FILE_ADVICE, advice, error_kind

    read_only = "OSError(30, 'Read-only file system')"
    assert error_kind(read_only) == "OSError"
    assert advice("extraction", error_kind(read_only)) == FILE_ADVICE
    assert advice("recall", "PermissionError") == FILE_ADVICE
    assert error_kind("the LLM answered HTTP 404") == "error"
    assert "MEMLANE_LLM_MODEL" in advice("extraction", error_kind("the LLM answered HTTP 404"))
    assert "MEMLANE_RECALL_DEADLINE_MS" in advice("recall", "TimeoutError")  # its own first
