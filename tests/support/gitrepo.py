"""A temporary git repository for the tests of memories that cite project files."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_output(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; its output as git wrote it."""
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; its output, stripped."""
    return git_output(repo, *args).strip()


def changed_in_head(repo: Path) -> list[str]:
    """What the last commit changed, a `status<TAB>path` line per file (renames apart)."""
    return git(repo, "show", "--no-renames", "--name-status", "--format=", "HEAD").splitlines()


def make_repo(folder: Path, files: dict[str, str]) -> Path:
    """A git repository at `folder` with `files` (path -> text) committed once."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(folder, "init", "-q")
    git(folder, "add", ".")
    git(folder, "commit", "-q", "-m", "first")
    return folder
