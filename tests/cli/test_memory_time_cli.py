"""`memlane memory add --valid-from`, `supersede`, `search --as-of` and `history` against a real
store and real files."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests.cli.test_memory_cli import run, runner

__all__ = ["runner"]  # the fixture: a CliRunner over a fresh home


def search(runner: CliRunner, *extra: str) -> list[str]:
    found = run(runner, "memory", "search", "editor", "--scope", "ns:dev", *extra, "--json")
    return [f["text"] for f in found]


def test_supersede_search_as_of_and_history(runner: CliRunner, tmp_path: Path) -> None:
    vim = run(
        runner,
        "memory", "add", "The user's editor is vim", "--scope", "ns:dev",
        "--valid-from", "2025-06-01", "--json",
    )  # fmt: skip
    assert vim["valid_from"] == "2025-06-01T00:00:00+00:00"
    changed = run(
        runner, "memory", "supersede", vim["id"][:8], "The user's editor is helix",
        "--at", "2026-02-01T10:00:00+01:00", "--json",
    )  # fmt: skip
    closed, new = changed["closed"], changed["new"]
    assert closed["valid_to"] == new["valid_from"] == "2026-02-01T09:00:00+00:00"
    assert (closed["replaced_by"], new["supersedes"]) == (new["id"], vim["id"])
    assert search(runner) == ["The user's editor is helix"]
    assert search(runner, "--as-of", "2025-12-24") == ["The user's editor is vim"]
    assert search(runner, "--as-of", "2025-01-01") == []
    history = run(runner, "memory", "history", new["id"], "--json")
    assert [(h["text"], h["current"]) for h in history] == [
        ("The user's editor is vim", False),
        ("The user's editor is helix", True),
    ]
    assert history[0]["cause"] is None  # added by hand: no message caused it
    files = sorted((tmp_path / "memory" / "entries").rglob("facts/*.md"))
    assert len(files) == 2  # both versions kept as files; none under deleted/
    assert any("valid_to: '2026-02-01T09:00:00+00:00'" in f.read_text() for f in files)
    log = run(runner, "memory", "log", "--json")
    assert log[0]["message"].startswith(
        f"memory: {vim['id']} replaced by {new['id']} on 2026-02-01"
    )
    listed = run(runner, "memory", "list")
    assert "2025-06-01 → 2026-02-01" in listed.stdout


def test_supersede_refuses_what_cannot_be_replaced(runner: CliRunner) -> None:
    tea = run(
        runner, "memory", "add", "The user drinks tea", "--valid-from", "2026-01-01", "--json"
    )
    early = run(runner, "memory", "supersede", tea["id"], "coffee", "--at", "2025-12-01", code=1)
    assert "only became true on 2026-01-01" in early.output
    bad = run(runner, "memory", "supersede", tea["id"], "coffee", "--at", "last tuesday", code=1)
    assert "--at 'last tuesday' is not a date" in bad.output
    run(runner, "memory", "supersede", tea["id"], "The user drinks coffee")  # at: now
    again = run(runner, "memory", "supersede", tea["id"], "The user drinks water", code=1)
    assert "was already replaced" in again.output
    assert "memlane memory history" in again.output
    bad = run(runner, "memory", "search", "tea", "--as-of", "2026-13-01", code=1)
    assert "--as-of '2026-13-01' is not a date" in bad.output
    current = run(runner, "memory", "search", "drinks", "--json")
    assert [f["text"] for f in current] == ["The user drinks coffee"]
