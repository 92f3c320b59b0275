"""Commits of the memory repository: every memory file, or only the paths a change touched."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from memlane.files import git_import
from memlane.files.git import GitError, GitRepo, commit_quietly
from tests.support.gitrepo import changed_in_head
from tests.support.gitrepo import git_output as git

E = "entries/"
"""Where memory files live in the repository: what a commit of every file stages."""


def put(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_a_commit_of_paths_stages_those_paths_only(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    for name in ("kept.md", "edited.md", "gone.md", "by_hand.md"):
        put(tmp_path, E + name, f"{name}\n")
    assert await repo.commit("start")  # every memory file
    put(tmp_path, E + "edited.md", "edited\n")
    (tmp_path / E / "gone.md").unlink()
    put(tmp_path, E + "new.md", "new\n")
    put(tmp_path, E + "by_hand.md", "a person's edit\n")  # not among the paths
    put(tmp_path, E + "stray.md", "untracked\n")

    assert await repo.commit("turns", [E + "edited.md", E + "gone.md", E + "new.md"])
    assert sorted(changed_in_head(tmp_path)) == [
        f"A\t{E}new.md",
        f"D\t{E}gone.md",
        f"M\t{E}edited.md",
    ]
    assert git(tmp_path, "log", "-1", "--format=%s%n%an") == "turns\nmemlane\n"
    assert sorted(git(tmp_path, "status", "--porcelain").splitlines()) == [
        f" M {E}by_hand.md",
        f"?? {E}stray.md",
    ]

    assert await repo.commit("everything")  # every memory file again: the rest goes in
    assert sorted(changed_in_head(tmp_path)) == [f"A\t{E}stray.md", f"M\t{E}by_hand.md"]
    assert git(tmp_path, "status", "--porcelain") == ""


async def test_a_commit_of_every_file_leaves_a_persons_other_files_alone(tmp_path: Path) -> None:
    """The memory folder is a person's repository too: a notes file beside the entries (a
    key in it) is theirs to commit, and memlane's whole commits carried it."""
    repo = GitRepo(tmp_path)
    put(tmp_path, E + "global/a.md", "a\n")
    put(tmp_path, "notes.txt", "API_KEY=sk-live-1234\n")
    put(tmp_path, "scripts/sync.sh", "echo\n")

    assert await repo.commit("start")
    (tmp_path / E / "global" / "a.md").unlink()  # a hand delete of the last entry
    assert await repo.commit("gone")

    assert sorted(git(tmp_path, "ls-files").split()) == [".gitignore"]
    every_commit = git(tmp_path, "log", "--all", "--name-only", "--format=")
    assert "notes.txt" not in every_commit
    assert "sync.sh" not in every_commit
    assert sorted(git(tmp_path, "status", "--porcelain").splitlines()) == [
        "?? notes.txt",
        "?? scripts/",
    ]


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
    put(tmp_path, E + "first.md", "first\n")
    assert await repo.commit("start")
    loose = _loose_objects(tmp_path)
    names = [f"{E}turns/{n:03d}.md" for n in range(150)]
    for name in names:
        put(tmp_path, name, f"turn {name}\n")
    put(tmp_path, E + "turns/tool.sh", "echo hi\n")
    (tmp_path / E / "turns" / "tool.sh").chmod(0o755)

    assert await repo.commit("turns", [*names, E + "turns/tool.sh"])
    assert _loose_objects(tmp_path) == loose  # the blobs and trees went into a pack
    assert len(changed_in_head(tmp_path)) == 151
    assert git(tmp_path, "show", f"HEAD:{E}turns/007.md") == f"turn {E}turns/007.md\n"
    assert git(tmp_path, "ls-tree", "HEAD", E + "turns/tool.sh").startswith("100755 ")
    assert git(tmp_path, "log", "--format=%s", "-n2").splitlines() == ["turns", "start"]
    assert git(tmp_path, "status", "--porcelain") == ""  # the index holds what was committed


async def test_packs_left_by_commits_are_combined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_import, "PACKS_BEFORE_REPACK", 2)
    repo = GitRepo(tmp_path)
    put(tmp_path, E + "first.md", "first\n")
    assert await repo.commit("start")
    for batch in range(4):
        names = [f"{E}b{batch}/{n:03d}.md" for n in range(120)]
        for name in names:
            put(tmp_path, name, f"{name}\n")
        assert await repo.commit(f"batch {batch}", names)
    assert 1 <= git_import.pack_count(tmp_path) <= 2
    assert git(tmp_path, "fsck", "--no-progress") == ""
    assert len(git(tmp_path, "ls-files").split()) == 482  # 480, first.md, .gitignore


async def test_nothing_is_committed_on_a_detached_head_and_a_branch_takes_it_all(
    tmp_path: Path,
) -> None:
    """A commit on a detached HEAD is hidden once a branch is checked out again, and its
    files with it: the memories written meanwhile vanished from the working tree, so from
    memlane's index too. Left uncommitted, they stay on disk across the checkout."""
    repo = GitRepo(tmp_path)
    put(tmp_path, E + "a.md", "a\n")
    assert await repo.commit("start")
    branch = git(tmp_path, "branch", "--show-current").strip()
    git(tmp_path, "checkout", "-q", "--detach")
    put(tmp_path, E + "platypus.md", "the user keeps a platypus\n")

    with pytest.raises(GitError, match="detached HEAD"):
        await repo.commit("new", [E + "platypus.md"])
    assert not await commit_quietly(repo, "new")
    assert git(tmp_path, "log", "--all", "--format=%s").splitlines() == ["start"]

    git(tmp_path, "checkout", "-q", branch)
    assert (tmp_path / E / "platypus.md").read_text() == "the user keeps a platypus\n"
    assert await repo.commit("on the branch")
    assert git(tmp_path, "show", f"HEAD:{E}platypus.md") == "the user keeps a platypus\n"


async def test_a_commit_that_changed_nothing_is_taken_back(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    put(tmp_path, E + "kept.md", "kept\n")
    assert await repo.commit("start")
    start = git(tmp_path, "rev-parse", "HEAD").strip()
    put(tmp_path, E + "kept.md", "kept\n")  # written back as it was
    put(tmp_path, E + "brief.md", "here a moment\n")
    (tmp_path / E / "brief.md").unlink()
    assert not await repo.commit("nothing", [E + "kept.md", E + "brief.md"])
    assert git(tmp_path, "rev-parse", "HEAD").strip() == start

    put(tmp_path, E + "kept.md", "edited\n")
    assert await repo.commit("edit", [E + "kept.md"])
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
    put(tmp_path, E + "a.md", "a\n")

    assert await repo.commit("start")
    by_the_commit = list(started_on)

    assert git(tmp_path, "log", "-1", "--format=%s") == "start\n"
    assert by_the_commit  # every git call went through subprocess...
    assert threading.get_ident() not in by_the_commit  # ...and none from the loop's thread
