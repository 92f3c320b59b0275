"""Recall's check of the files a memory cites: current, changed, moved, deleted."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from memlane.engine.memory.cites import note
from memlane.engine.memory.stale import ProjectChecks
from memlane.files import project
from memlane.types import Fact
from tests.engine.memory.test_cites import fact
from tests.support.gitrepo import git, make_repo


def noted(repo: Path, text: str) -> Fact:
    cited = note(fact(text, scope=f"ns:{repo}"), repo)
    assert cited.cites is not None
    return cited


def test_an_untouched_file_is_current(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n"})
    checked = ProjectChecks().check(noted(repo, "conf/app.toml"))
    assert checked.status == "current"
    assert not checked.stale
    assert checked.note == ""


def test_a_committed_edit_says_changed_with_the_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n", "b.py": "b\n"})
    cited = noted(repo, "conf/app.toml and b.py")
    before = git(repo, "rev-parse", "HEAD")
    (repo / "conf/app.toml").write_text("port = 2\n")
    git(repo, "commit", "-qam", "port")
    checked = ProjectChecks().check(cited)
    assert checked.status == "changed"
    assert [f.status for f in checked.files] == ["changed", "current"]
    after = git(repo, "rev-parse", "HEAD")
    assert checked.note == (
        f"noted 2026-11-02; conf/app.toml has changed since ({before[:7]}..{after[:7]})"
    ).replace("2026-11-02", cited.cites.noted_at.date().isoformat())  # type: ignore[union-attr]


def test_an_uncommitted_edit_is_a_change_too(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n"})
    cited = noted(repo, "a.py")
    (repo / "a.py").write_text("b\n")
    checked = ProjectChecks().check(cited)
    assert checked.status == "changed"
    assert checked.commits is None


def test_the_cache_rehashes_only_when_size_or_mtime_moves(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n"})
    cited = noted(repo, "a.py")
    checks = ProjectChecks()
    assert checks.check(cited).status == "current"
    stat = (repo / "a.py").stat()
    (repo / "a.py").write_text("b\n")  # same size
    os.utime(repo / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert checks.check(cited).status == "current"  # the cache's key did not move
    os.utime(repo / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert checks.check(cited).status == "changed"


def test_a_deleted_file_is_stale(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n", "b.py": "b\n"})
    cited = noted(repo, "a.py")
    git(repo, "rm", "-q", "a.py")
    git(repo, "commit", "-qm", "gone")
    checked = ProjectChecks().check(cited)
    assert checked.status == "deleted"
    assert "a.py has been deleted since" in checked.note


def test_a_renamed_file_is_followed_once_git_was_asked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\nhost = x\n" * 5})
    cited = noted(repo, "conf/app.toml")
    git(repo, "mv", "conf/app.toml", "conf/main.toml")
    git(repo, "commit", "-qm", "rename")
    checks = ProjectChecks()
    assert checks.check(cited).status == "deleted"  # git not asked yet: gone for now
    assert checks.fill_renames() == 1
    checked = checks.check(cited)
    assert checked.status == "moved"
    assert "conf/app.toml moved to conf/main.toml" in checked.note
    assert checks.fill_renames() == 0  # asked once per pair of commits


def test_a_rename_whose_lookup_never_ran_is_asked_for_again(tmp_path: Path) -> None:
    """Recall asks git for renames in a spawned job (`verify.renames_later`). A job that
    never ran (dropped past the background's bounds, or cancelled at a stop) loses
    nothing: the pair stays wanted, and the next check that needs it asks again."""
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\nhost = x\n" * 5})
    cited = noted(repo, "conf/app.toml")
    git(repo, "mv", "conf/app.toml", "conf/main.toml")
    git(repo, "commit", "-qm", "rename")
    checks = ProjectChecks()
    assert checks.check(cited).status == "deleted"
    wanted = set(checks.wanted)
    assert wanted  # the job that would ask git is spawned now; it never runs
    assert checks.check(cited).status == "deleted"
    assert checks.wanted == wanted  # asked for again by the next check
    assert checks.fill_renames() == 1  # the next job that runs
    assert checks.check(cited).status == "moved"


def test_a_memory_is_never_checked_outside_its_own_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n"})
    cited = noted(repo, "a.py")
    checks = ProjectChecks()
    other = make_repo(tmp_path / "web", {"a.py": "z\n"})
    assert checks.check(replace(cited, scope=f"ns:{other}")).status == "unchecked"
    assert cited.cites is not None
    escaping = replace(cited.cites, files=(replace(cited.cites.files[0], path="../web/a.py"),))
    assert checks.check(replace(cited, cites=escaping)).status == "deleted"  # never read
    gone = replace(cited.cites, root=str(tmp_path / "elsewhere"))
    assert checks.check(replace(cited, scope="conv:s1", cites=gone)).status == "unchecked"


def test_the_budget_caps_the_files_checked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n", "b.py": "b\n"})
    first, second = noted(repo, "a.py b.py"), replace(noted(repo, "b.py"), id="f2")
    checks = ProjectChecks().check_all([first, second], budget=2)
    assert [f.path for f in checks["f1"].files] == ["a.py", "b.py"]
    assert "f2" not in checks


def test_a_file_grown_past_the_hashing_limit_has_changed_unread(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"data.csv": "a,b\n"})
    cited = noted(repo, "data.csv")
    os.truncate(repo / "data.csv", 1 << 36)  # 64 GiB, sparse: reading it would not end well
    assert (repo / "data.csv").stat().st_size > project.MAX_HASHED_BYTES
    assert ProjectChecks().check(cited).status == "changed"
