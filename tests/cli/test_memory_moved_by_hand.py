"""A memory file a person renamed, moved or re-identified is still that memory's file.

The front matter's `id:` says which memory a file holds, not its name: `memory edit`
writes into it (never beside it), `forget` moves it, `forget --purge` removes it and
every path of the history that ever held it, and a purge that cannot remove it says
so instead of saying it purged everything.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import memlane
from memlane.cli.app import app
from memlane.engine.memory import manage
from memlane.files.memory_files import MemoryFiles
from tests.support.gitrepo import every_object

SECRET = "Clementine-4417"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    monkeypatch.setenv("MEMLANE_EMBEDDING_BACKEND", "hashing")
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "EDITOR", "VISUAL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if "--json" in args and code == 0 else result


def added(text: str) -> str:
    return str(run("memory", "add", text, "--json")["id"])


def facts(home: Path) -> Path:
    return home / "memory" / "entries" / "global" / "facts"


def holding(home: Path, memory_id: str) -> list[str]:
    """The files under the memory folder that name `memory_id` (front matter or name)."""
    root = home / "memory" / "entries"
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.md")
        if memory_id in path.name or f"id: {memory_id}\n" in path.read_text()
    )


def in_git(home: Path, needle: str) -> bool:
    repo = home / "memory"
    log = subprocess.run(
        ["git", "log", "--all", "-p"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return needle in log or needle.encode() in every_object(repo)


def rename(home: Path, memory_id: str, to: Path) -> Path:
    (path,) = facts(home).glob(f"*__{memory_id}.md")
    target = home / "memory" / "entries" / to
    target.parent.mkdir(parents=True, exist_ok=True)
    path.rename(target)
    return target


def test_a_memory_renamed_by_hand_is_purged(home: Path) -> None:
    """QA's case: renamed, seen by the index, never committed under its new name."""
    memory_id = added(f"The user's sister is named {SECRET}")
    rename(home, memory_id, Path("global/facts/sister.md"))
    run("memory", "list")

    purged = run("memory", "forget", memory_id, "--purge")
    assert f"purged {memory_id}" in purged.stdout
    assert holding(home, memory_id) == []
    assert run("memory", "search", SECRET, "--json") == []
    assert not in_git(home, SECRET)


def test_a_memory_committed_under_the_name_a_person_gave_it_is_purged_under_both(
    home: Path,
) -> None:
    memory_id = added(f"The user's sister is named {SECRET}")
    rename(home, memory_id, Path("global/facts/sister.md"))
    added("The shed is green")  # its commit takes the rename in
    moved = home / "memory" / "entries" / "global" / "people" / "sis.md"
    moved.parent.mkdir()
    (facts(home) / "sister.md").rename(moved)
    moved.write_text(moved.read_text().replace(SECRET, f"{SECRET}-b"))
    added("The gate is red")  # ...and the move, with its edit
    assert in_git(home, SECRET)

    run("memory", "forget", memory_id, "--purge")
    assert holding(home, memory_id) == []
    assert not in_git(home, SECRET)
    assert in_git(home, "The shed is green")
    assert len(run("memory", "list", "--json")) == 2


def test_a_memory_whose_id_a_person_changed_is_purged_with_its_file(home: Path) -> None:
    first = added(f"The user's sister is named {SECRET}")
    (path,) = facts(home).glob(f"*__{first}.md")
    path.write_text(path.read_text().replace(f"id: {first}", "id: handmade42"))
    added("The shed is green")  # the id change is committed
    assert [f["id"] for f in run("memory", "search", SECRET, "--json")] == ["handmade42"]

    run("memory", "forget", "handmade42", "--purge")
    assert not path.exists()
    assert run("memory", "search", SECRET, "--json") == []
    assert not in_git(home, SECRET)
    assert in_git(home, "The shed is green")


def test_an_edit_writes_the_file_a_person_moved_and_leaves_no_second_one(home: Path) -> None:
    memory_id = added(f"The user's sister is named {SECRET}")
    rename(home, memory_id, Path("global/people/sister.md"))
    run("memory", "list")

    run("memory", "edit", memory_id, "--text", "The user's sister is named Ana")
    (held,) = holding(home, memory_id)
    assert (home / "memory" / "entries" / held).read_text().endswith("named Ana\n")
    assert run("memory", "show", memory_id, "--json")["text"] == "The user's sister is named Ana"

    run("memory", "forget", memory_id)
    (tomb,) = holding(home, memory_id)
    assert tomb.startswith("global/deleted/facts/")
    assert run("memory", "list", "--json") == []

    run("memory", "forget", memory_id, "--purge")  # nothing brings it back
    assert holding(home, memory_id) == []
    assert run("memory", "list", "--deleted", "--json") == []
    assert not in_git(home, SECRET)


def test_an_edit_never_overwrites_a_file_that_holds_another_id(home: Path) -> None:
    """A person copied a memory's file, then gave the original another id: the file
    named for the first id is the other memory's now, and editing the first leaves it."""
    memory_id = added(f"The user's sister is named {SECRET}")
    (path,) = facts(home).glob(f"*__{memory_id}.md")
    (facts(home) / "copy.md").write_text(path.read_text())
    path.write_text(path.read_text().replace(f"id: {memory_id}", "id: handmade42"))
    run("memory", "list")

    run("memory", "edit", memory_id, "--text", "The user's sister is named Ana")
    assert run("memory", "show", "handmade42", "--json")["text"].endswith(SECRET)
    assert run("memory", "show", memory_id, "--json")["text"].endswith("Ana")
    assert len(holding(home, memory_id)) == 1
    (other,) = holding(home, "handmade42")
    assert (home / "memory" / "entries" / other).read_text().endswith(f"{SECRET}\n")
    run("memory", "list")  # and the index, caught up again, still has both
    assert {f["id"] for f in run("memory", "list", "--json")} == {memory_id, "handmade42"}


def test_forget_takes_a_duplicate_a_person_left_too(home: Path) -> None:
    """Two files hold one id (what an edit after a rename used to leave): the index took
    the first in order, and forgetting the memory leaves neither active."""
    memory_id = added(f"The user's sister is named {SECRET}")
    (path,) = facts(home).glob(f"*__{memory_id}.md")
    copy = home / "memory" / "entries" / "global" / "aaa" / "sister.md"
    copy.parent.mkdir()
    copy.write_text(path.read_text().replace(SECRET, f"{SECRET}-old"))
    run("memory", "list")

    run("memory", "forget", memory_id)
    (tomb,) = holding(home, memory_id)
    assert tomb.startswith("global/deleted/")
    assert run("memory", "list", "--json") == []


def test_a_memorys_file_is_found_wherever_a_person_moved_it(home: Path) -> None:
    """What `memory show` and the inspector print as the memory's file."""
    memory_id = added(f"The user's sister is named {SECRET}")
    moved = rename(home, memory_id, Path("global/people/sister.md"))
    run("memory", "list")  # the index, and its snapshot, see the move
    assert run("memory", "show", memory_id, "--json")["file"] == str(moved)
    with memlane.open_runtime(home=home, embedding_backend="hashing") as rt:
        fact = rt.store.get_fact(memory_id)
        assert fact is not None
        assert manage.memory_file(rt, fact) == moved
        (home / "memory" / "memory_index.json").unlink()  # no snapshot: the folder is read
        assert manage.memory_file(rt, fact) == moved


def test_a_purge_that_cannot_remove_a_file_says_what_is_left(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = added(f"The user's sister is named {SECRET}")
    stuck = rename(home, memory_id, Path("global/facts/sister.md"))
    run("memory", "list")

    def refuse(files: MemoryFiles, path: Path) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(MemoryFiles, "remove", refuse)
    failed = run("memory", "forget", memory_id, "--purge", code=1)
    said = " ".join(failed.output.split())
    assert "and every version of it" not in said
    assert f"{stuck} still holds it" in said
    assert "run the same command again" in said
