"""Commits of the memory repository: the whole tree, or only the paths a change touched."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from memlane.files import git_import
from memlane.files.git import GitRepo
from tests.support.gitrepo import changed_in_head
from tests.support.gitrepo import git_output as git


async def test_a_commit_of_paths_stages_those_paths_only(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    for name in ("kept.md", "edited.md", "gone.md", "by_hand.md"):
        (tmp_path / name).write_text(f"{name}\n")
    assert await repo.commit("start")  # the whole tree
    (tmp_path / "edited.md").write_text("edited\n")
    (tmp_path / "gone.md").unlink()
    (tmp_path / "new.md").write_text("new\n")
    (tmp_path / "by_hand.md").write_text("a person's edit\n")  # not among the paths
    (tmp_path / "stray.md").write_text("untracked\n")

    assert await repo.commit("turns", ["edited.md", "gone.md", "new.md"])
    assert sorted(changed_in_head(tmp_path)) == ["A\tnew.md", "D\tgone.md", "M\tedited.md"]
    assert git(tmp_path, "log", "-1", "--format=%s%n%an") == "turns\nmemlane\n"
    assert sorted(git(tmp_path, "status", "--porcelain").splitlines()) == [
        " M by_hand.md",
        "?? stray.md",
    ]

    assert await repo.commit("everything")  # the whole tree again: the rest goes in
    assert sorted(changed_in_head(tmp_path)) == ["A\tstray.md", "M\tby_hand.md"]
    assert git(tmp_path, "status", "--porcelain") == ""


async def test_paths_that_did_not_change_make_no_commit(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    (tmp_path / "a.md").write_text("a\n")
    assert await repo.commit("start", ["a.md", ".gitignore"])  # the first commit of the repo
    head = git(tmp_path, "rev-parse", "HEAD")
    assert sorted(git(tmp_path, "ls-files").split()) == [".gitignore", "a.md"]
    assert not await repo.commit("again", ["a.md", "never-written.md"])
    assert not await repo.commit("none", [])
    assert git(tmp_path, "rev-parse", "HEAD") == head


def _loose_objects(repo: Path) -> int:
    counts = dict(line.split(": ") for line in git(repo, "count-objects", "-v").splitlines())
    return int(counts["count"])


async def test_a_commit_of_many_paths_writes_one_pack_and_keeps_the_index_in_step(
    tmp_path: Path,
) -> None:
    repo = GitRepo(tmp_path)
    (tmp_path / "first.md").write_text("first\n")
    assert await repo.commit("start")
    loose = _loose_objects(tmp_path)
    names = [f"turns/{n:03d}.md" for n in range(150)]
    (tmp_path / "turns").mkdir()
    for name in names:
        (tmp_path / name).write_text(f"turn {name}\n")
    (tmp_path / "turns" / "tool.sh").write_text("echo hi\n")
    (tmp_path / "turns" / "tool.sh").chmod(0o755)

    assert await repo.commit("turns", [*names, "turns/tool.sh"])
    assert _loose_objects(tmp_path) == loose  # the blobs and trees went into a pack
    assert len(changed_in_head(tmp_path)) == 151
    assert git(tmp_path, "show", "HEAD:turns/007.md") == "turn turns/007.md\n"
    assert git(tmp_path, "ls-tree", "HEAD", "turns/tool.sh").startswith("100755 ")
    assert git(tmp_path, "log", "--format=%s", "-n2").splitlines() == ["turns", "start"]
    assert git(tmp_path, "status", "--porcelain") == ""  # the index holds what was committed


async def test_packs_left_by_commits_are_combined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_import, "PACKS_BEFORE_REPACK", 2)
    repo = GitRepo(tmp_path)
    (tmp_path / "first.md").write_text("first\n")
    assert await repo.commit("start")
    for batch in range(4):
        names = [f"b{batch}/{n:03d}.md" for n in range(120)]
        (tmp_path / f"b{batch}").mkdir()
        for name in names:
            (tmp_path / name).write_text(f"{name}\n")
        assert await repo.commit(f"batch {batch}", names)
    assert 1 <= git_import.pack_count(tmp_path) <= 2
    assert git(tmp_path, "fsck", "--no-progress") == ""
    assert len(git(tmp_path, "ls-files").split()) == 482  # 480, first.md, .gitignore


async def test_a_commit_of_paths_on_a_detached_head_commits_the_tree(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    (tmp_path / "a.md").write_text("a\n")
    assert await repo.commit("start")
    git(tmp_path, "checkout", "-q", "--detach")
    (tmp_path / "a.md").write_text("edited\n")
    assert await repo.commit("edit", ["a.md"])
    assert git(tmp_path, "log", "--format=%s").splitlines() == ["edit", "start"]
    assert git(tmp_path, "show", "HEAD:a.md") == "edited\n"


async def test_a_commit_that_changed_nothing_is_taken_back(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    (tmp_path / "kept.md").write_text("kept\n")
    assert await repo.commit("start")
    start = git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "kept.md").write_text("kept\n")  # written back as it was
    (tmp_path / "brief.md").write_text("here a moment\n")
    (tmp_path / "brief.md").unlink()
    assert not await repo.commit("nothing", ["kept.md", "brief.md"])
    assert git(tmp_path, "rev-parse", "HEAD").strip() == start

    (tmp_path / "kept.md").write_text("edited\n")
    assert await repo.commit("edit", ["kept.md"])
    assert git(tmp_path, "log", "--format=%s").splitlines() == ["edit", "start"]
    assert git(tmp_path, "rev-parse", "HEAD^").strip() == start
    assert git(tmp_path, "status", "--porcelain") == ""


async def test_git_is_started_from_a_worker_thread_not_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started on the loop, uvloop forks the whole process there: at a proxy's few hundred
    MB that held every request for tens of milliseconds (`benchmarks/git_spawn.py`)."""
    started_on: list[int] = []
    run = subprocess.run

    def watched(*args: Any, **kwargs: Any) -> Any:
        started_on.append(threading.get_ident())
        return run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", watched)
    repo = GitRepo(tmp_path)
    (tmp_path / "a.md").write_text("a\n")

    assert await repo.commit("start")
    by_the_commit = list(started_on)

    assert git(tmp_path, "log", "-1", "--format=%s") == "start\n"
    assert by_the_commit  # every git call went through subprocess...
    assert threading.get_ident() not in by_the_commit  # ...and none from the loop's thread
