"""Temporary git repositories: for memories that cite project files, and for purges."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


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


def every_object(repo: Path) -> bytes:
    """Every object of the repository, reachable or not, loose or packed, decompressed:
    where a purged text must be found nowhere."""
    return subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout


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


def failing_purge_git(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put first on PATH a `git` that refuses `fast-import --force` (the rewrite of a
    purge) and runs every other command with the real git."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "git"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = fast-import ]; then\n'
        '  for arg in "$@"; do\n'
        '    [ "$arg" = --force ] && { echo "fast-import refused by the test" >&2; exit 1; }\n'
        "  done\n"
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
