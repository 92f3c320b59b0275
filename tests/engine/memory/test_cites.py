"""What a memory cites: path-like words, and the files of the project recorded for them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.engine.memory.cites import mentioned, note, project_of
from memlane.files.project import git_blob_id
from memlane.types import Fact
from tests.support.gitrepo import git, make_repo

WHEN = datetime(2026, 11, 2, tzinfo=UTC)


def fact(text: str, scope: str = "ns:x") -> Fact:
    return Fact("f1", scope, "s1", "memory", text, WHEN, WHEN)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("The service config lives in conf/app.toml.", ["conf/app.toml"]),
        ("`parse_rows` in store/rows.py returns dicts", ["store/rows.py"]),
        (
            "see store/rows.py:parse_rows or src/a/rows.py::parse_rows",
            ["store/rows.py", "src/a/rows.py"],
        ),
        ("tests run with `make check`", []),
        ("release 1.2.3 from https://example.com/a/b.py", []),
        ("never ../etc/passwd nor /etc/passwd", []),
        ("mail me@host.org about README.md", ["README.md"]),
    ],
)
def test_path_like_words_are_found(text: str, paths: list[str]) -> None:
    assert mentioned(text) == paths


def test_a_fact_records_each_cited_file_as_it_is_with_the_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n", "src/deep/rows.py": "x\n"})
    (repo / "notes.txt").write_text("untracked\n")
    text = "conf/app.toml sets the port; notes.txt and rows.py hold the rest; docs/none.md is gone"
    noted = note(fact(text), repo)
    assert noted.cites is not None
    assert noted.cites.root == str(repo)
    assert noted.cites.head == git(repo, "rev-parse", "HEAD")
    by_path = {f.path: f.blob for f in noted.cites.files}
    assert by_path["conf/app.toml"] == "git:" + git(repo, "hash-object", "conf/app.toml")
    assert by_path["src/deep/rows.py"] == "git:" + git_blob_id(b"x\n")  # a bare name, tracked once
    assert by_path["notes.txt"].startswith("sha256:")  # not tracked: a content hash
    assert list(by_path) == ["conf/app.toml", "notes.txt", "src/deep/rows.py"]


def test_nothing_outside_the_project_is_recorded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.txt": "a\n"})
    (tmp_path / "secret.txt").write_text("s\n")
    os.symlink(tmp_path / "secret.txt", repo / "link.txt")
    assert note(fact("link.txt and ../secret.txt"), repo).cites is None


def test_a_memory_without_a_project_here_records_nothing(tmp_path: Path) -> None:
    assert project_of("ns:home") is None
    assert project_of("ns:/") is None
    assert project_of(f"ns:{tmp_path / 'gone'}") is None
    assert project_of(f"t:{'a' * 32}:ns:{tmp_path}") == tmp_path
    assert project_of("conv:s1", str(tmp_path)) == tmp_path
    assert project_of("conv:s1") is None
    assert note(fact("conf/app.toml"), None).cites is None
