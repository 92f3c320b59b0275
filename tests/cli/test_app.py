"""The root command: groups imported only when they run, so `--version` and `--help` stay light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memlane.cli.app import COMMANDS, app

HEAVY = (
    "numpy",
    "httpx",
    "pydantic",
    "rich.markdown",
    "typer.rich_utils",
    "memlane.config",
    "memlane.store",
    "memlane.engine",
    *(lazy.module for lazy in COMMANDS.values()),
)

PROBE = """
import json, sys
from memlane.cli.app import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
heavy = json.loads(sys.stdin.read())
print(json.dumps([name for name in heavy if name in sys.modules]))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_the_root_imports_no_command_group_and_no_heavy_dependency(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        input=json.dumps(HEAVY),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
    if args == ["--help"]:
        for name in COMMANDS:
            assert f"  {name} " in done.stdout


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    command = COMMANDS[name].load(name)
    assert command.name == name
    assert command.get_short_help_str(limit=1_000) == COMMANDS[name].help


def test_every_command_runs_through_the_lazy_root() -> None:
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    assert root.list_commands(ctx) == list(COMMANDS)
    config = root.get_command(ctx, "config")
    assert config.list_commands(typer.Context(config)) == ["show", "set", "unset"]


def test_a_mistyped_command_is_named_with_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["sesions", "list"])
    assert result.exit_code == 2
    assert "No such command 'sesions'. Did you mean 'sessions'?" in result.stderr


@pytest.mark.parametrize(
    "args", [["sessions", "--help"], ["sessions", "list", "--json"], ["memory", "list", "--json"]]
)
def test_a_command_that_calls_no_one_loads_no_http_client(args: list[str], tmp_path: Path) -> None:
    """aiohttp, httpx and urllib.request cost a quarter of such a command's start (0.3 s of
    1.0): they are imported when memlane makes a call, not with the modules that make calls."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(tmp_path), *args],
        input=json.dumps(["aiohttp", "httpx", "urllib.request"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
