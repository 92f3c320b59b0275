from __future__ import annotations

import json
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
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 1
    assert "invalid setting 'port'" in result.stderr
    assert "Traceback" not in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("memlane ")
