"""Commits of the memory repository: the whole tree, or only the paths a change touched."""

from __future__ import annotations

from pathlib import Path

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
