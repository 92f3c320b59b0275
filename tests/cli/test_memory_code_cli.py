"""`memlane memory stale` and `memlane memory verify [--confirm]` against a real project,
store and files."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests.cli.test_memory_cli import run, runner
from tests.support.gitrepo import git, make_repo

__all__ = ["runner"]  # the fixture: a CliRunner over a fresh home


def test_stale_lists_what_moved_on_and_verify_confirms_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n" * 8, "b.py": "b\n"})
    scope = f"ns:{repo}"
    config = run(runner, "memory", "add", "The config is conf/app.toml", "--scope", scope, "--json")
    assert config["cites"]["files"][0]["path"] == "conf/app.toml"
    assert config["cites"]["head"] == git(repo, "rev-parse", "HEAD")
    run(runner, "memory", "add", "Builds start in b.py", "--scope", scope, "--json")
    run(runner, "memory", "add", "The user prefers tabs", "--scope", scope, "--json")
    assert run(runner, "memory", "stale", "--json") == []

    git(repo, "mv", "conf/app.toml", "conf/main.toml")
    git(repo, "commit", "-qm", "rename")
    (repo / "b.py").write_text("c\n")
    found = run(runner, "memory", "stale", "--project", str(repo), "--json")
    assert [(f["text"], f["code"]["status"]) for f in found] == [
        ("The config is conf/app.toml", "moved"),
        ("Builds start in b.py", "changed"),
    ]
    assert found[0]["code"]["files"][0]["moved_to"] == "conf/main.toml"
    assert run(runner, "memory", "stale", "--project", str(tmp_path), "--json") == []
    listed = run(runner, "memory", "stale")
    assert "moved" in listed.stdout
    assert "changed" in listed.stdout

    checked = run(runner, "memory", "verify", config["id"], "--json")
    assert (checked["code"]["status"], checked["confirmed"]) == ("moved", False)
    confirmed = run(runner, "memory", "verify", config["id"][:8], "--confirm", "--json")
    assert confirmed["confirmed"] is True
    assert confirmed["code"]["status"] == "current"
    assert [f["path"] for f in confirmed["cites"]["files"]] == ["conf/main.toml"]
    assert [f["text"] for f in run(runner, "memory", "stale", "--json")] == ["Builds start in b.py"]
    plain = run(runner, "memory", "verify", config["id"])
    assert "current" in plain.stdout


def test_verify_says_why_a_memory_is_not_checked(runner: CliRunner) -> None:
    tabs = run(runner, "memory", "add", "The user prefers tabs", "--json")
    assert tabs["cites"] is None
    said = run(runner, "memory", "verify", tabs["id"])
    assert "not checked (cites no project file)" in said.stdout
