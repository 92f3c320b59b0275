"""A command that reads what is stored refuses a home that is not there (`cli.context`).

Opening a store creates it: `memlane --home ~/.memlan sessions list` made a new empty home
and answered "no sessions yet", as if the memory were gone. Now only the commands that
add to the store create one; the others fail in one line naming the path, and leave
nothing on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from tests.cli.test_connect_agents import free_port

ID = "0123456789abcdef"
NEEDS_A_STORE = [
    ("sessions", "list"),
    ("sessions", "list", "--json"),
    ("sessions", "show", "greeting", "--json"),
    ("sessions", "export", "greeting"),
    ("sessions", "context", "greeting"),
    ("sessions", "output", "greeting"),
    ("sessions", "ask", "greeting", "what?"),
    ("sessions", "delete", "greeting", "--yes"),
    ("sessions", "fork", "greeting"),
    ("memory", "list", "--json"),
    ("memory", "search", "tabs"),
    ("memory", "show", ID),
    ("memory", "history", ID),
    ("memory", "forget", ID),
    ("memory", "stale", "--json"),
    ("memory", "log"),
    ("memory", "reindex"),
    ("status",),
    ("status", "--json"),
    ("store", "info"),
    ("store", "purge"),
]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """No home from the environment: the default one is under tmp_path (XDG_DATA_HOME);
    both upstreams are a closed loopback port (nothing beyond this machine is asked)."""
    for name in list(os.environ):
        if name.startswith(("MEMLANE_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("MEMLANE_EMBEDDING_BACKEND", "hashing")
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MEMLANE_UPSTREAM_URL", dead)
    monkeypatch.setenv("MEMLANE_ANTHROPIC_UPSTREAM_URL", dead)
    return CliRunner()


@pytest.mark.parametrize("command", NEEDS_A_STORE, ids=" ".join)
def test_a_mistyped_home_is_refused_and_not_created(
    runner: CliRunner, tmp_path: Path, command: tuple[str, ...]
) -> None:
    typo = tmp_path / ".memlan"
    result = runner.invoke(app, ["--home", str(typo), *command])

    assert result.exit_code == 1, result.output
    assert result.stdout == ""  # `--json` prints nothing a script could take for an answer
    assert f"no memlane home at {typo} (from --home)" in result.stderr
    assert "`memlane serve` or `memlane init`" in result.stderr
    assert not typo.exists()


def test_a_home_from_the_environment_is_named_as_such(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typo = tmp_path / "memlane-hom"
    monkeypatch.setenv("MEMLANE_HOME", str(typo))
    result = runner.invoke(app, ["memory", "export", str(tmp_path / "out")])

    assert result.exit_code == 1, result.output
    assert f"no memlane home at {typo} (from MEMLANE_HOME)" in result.stderr
    assert not typo.exists()
    assert not (tmp_path / "out").exists()


def test_a_newcomer_is_told_nothing_is_stored_yet_and_how_to_start(
    runner: CliRunner, tmp_path: Path
) -> None:
    default = tmp_path / "data" / "memlane"
    result = runner.invoke(app, ["sessions", "list"])

    assert result.exit_code == 1, result.output
    assert f"nothing stored yet (no memlane home at {default})" in result.stderr
    assert "start the proxy with `memlane serve`" in result.stderr
    assert "Traceback" not in result.output
    assert not default.exists()


def test_a_missing_sqlite_file_is_refused_and_not_created(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    result = runner.invoke(app, ["--store-url", url, "sessions", "list", "--json"])

    assert result.exit_code == 1, result.output
    assert f"no SQLite store at {tmp_path / 'typo.db'} (from --store-url)" in result.stderr
    assert not (tmp_path / "typo.db").exists()


def test_adding_to_the_store_still_starts_a_home(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "new"
    added = runner.invoke(app, ["--home", str(home), "memory", "add", "The user likes tea"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["--home", str(home), "memory", "list", "--json"])
    assert [m["text"] for m in json.loads(listed.stdout)] == ["The user likes tea"]


def test_a_home_init_made_is_read_as_empty(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    made = runner.invoke(app, ["--home", str(home), "init", "--yes", "--json"])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(app, ["--home", str(home), "sessions", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
