from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def test_config_show_json_reports_values_and_sources(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store-url", "sqlite:///x.db", "config", "show", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["settings"]["home"] == {"value": str(tmp_path), "source": "env MEMLANE_HOME"}
    assert data["settings"]["store_url"]["source"] == "flag"
    assert data["settings"]["port"] == {"value": 8100, "source": "default"}


def test_config_show_table(runner: CliRunner) -> None:
    from memlane.config import Settings

    result = runner.invoke(app, ["config", "show"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert "MEMLANE_UPSTREAM_URL" in result.stdout
    names = {word.strip("│┃ ") for word in result.stdout.split() if word.startswith("MEMLANE_")}
    assert names == {f"MEMLANE_{name.upper()}" for name in Settings.model_fields}  # none cut


def test_invalid_config_is_one_clear_line(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_PORT", "not-a-port")
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 1
    assert "invalid setting 'port'" in result.stderr
    assert "Traceback" not in result.output
    shown = runner.invoke(app, ["config", "show"])  # shows the rest, and what is wrong
    assert shown.exit_code == 0
    assert "invalid setting 'port' (from env MEMLANE_PORT)" in shown.stderr
    assert "the default is used" in shown.stderr


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("memlane ")


def test_a_key_typo_names_the_key_and_its_nearest_setting_and_show_still_works(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text('upstrem_url = "http://127.0.0.1:9/v1"\nport = 9000\n')

    broken = runner.invoke(app, ["sessions", "list"])
    assert broken.exit_code == 1
    assert "unknown setting 'upstrem_url'" in broken.output
    assert "did you mean 'upstream_url'?" in broken.output

    shown = runner.invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["settings"]["port"]["value"] == 9000  # the rest of the file still applies
    assert len(data["problems"]) == 1
    assert "did you mean 'upstream_url'?" in data["problems"][0]

    fixed = runner.invoke(app, ["config", "unset", "upstrem_url"])
    assert fixed.exit_code == 0, fixed.output
    assert runner.invoke(app, ["sessions", "list"]).exit_code == 0


def test_config_set_checks_the_value_and_keeps_the_rest_of_the_file(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# my comment\nport = 9000\n", encoding="utf-8")

    assert runner.invoke(app, ["config", "set", "MEMLANE_PORT", "9100"]).exit_code == 0
    assert runner.invoke(app, ["config", "set", "llm_model", "qwen3:4b"]).exit_code == 0
    windows = runner.invoke(app, ["config", "set", "governance_context_windows", "qwen3=40960"])
    assert windows.exit_code == 0, windows.output
    text = path.read_text(encoding="utf-8")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the config is the user's alone
    assert text == (
        '# my comment\nport = 9100\nllm_model = "qwen3:4b"\n'
        'governance_context_windows = { "qwen3" = 40960 }\n'
    )
    shown = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)["settings"]
    assert shown["governance_context_windows"]["value"] == {"qwen3": 40960}

    for args, said in [
        (["port", "70000"], "invalid value for port"),
        (["prot", "1"], "did you mean 'port'?"),
        (["upstream_api_key", "sk-secret"], "set upstream_api_key_env"),
        (["governance_compact_target", "0.95"], "must be below governance_compact_threshold"),
    ]:
        refused = runner.invoke(app, ["config", "set", *args])
        assert refused.exit_code == 1
        assert said in refused.output
    assert path.read_text(encoding="utf-8") == text  # nothing written
    assert "sk-secret" not in text

    assert runner.invoke(app, ["config", "unset", "llm_model"]).exit_code == 0
    assert "llm_model" not in path.read_text(encoding="utf-8")


def test_a_key_is_read_from_the_variable_the_file_names(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-gateway-0123")
    assert (
        runner.invoke(app, ["config", "set", "upstream_api_key_env", "MY_GATEWAY_KEY"]).exit_code
        == 0
    )
    data = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)["settings"]
    assert data["upstream_api_key"] == {"value": "********", "source": "env MY_GATEWAY_KEY"}
    assert "sk-gateway" not in (tmp_path / "config.toml").read_text(encoding="utf-8")


def test_a_file_wrong_in_two_keys_is_fixed_one_key_at_a_time(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('memory_top_k = "lots"\nbogus = 1\nport = 9000\n', encoding="utf-8")

    unset = runner.invoke(app, ["config", "unset", "bogus"])
    assert unset.exit_code == 0, unset.output
    assert path.read_text(encoding="utf-8") == 'memory_top_k = "lots"\nport = 9000\n'
    assert runner.invoke(app, ["config", "set", "port", "9100"]).exit_code == 0
    worse = runner.invoke(app, ["config", "set", "port", "70000"])  # a new problem: refused
    assert worse.exit_code == 1
    assert "port" in worse.output
    fixed = runner.invoke(app, ["config", "set", "memory_top_k", "8"])
    assert fixed.exit_code == 0, fixed.output
    assert path.read_text(encoding="utf-8") == "memory_top_k = 8\nport = 9100\n"
    assert runner.invoke(app, ["sessions", "list"]).exit_code == 0
