"""Reading a project folder on this machine: the files a memory cites, and its git state.

A memory that names `conf/app.toml` records what that file held (`Fact.cites`); recall
compares. This module is the only place memlane reads a user's project, and it reads
only there: every path is relative to the project folder, may not climb out of it
(`..`, an absolute path, a symlink pointing elsewhere) and is refused otherwise.

Two kinds of reads:

- cheap ones, fine in front of a response: `stat`, reading a cited file to hash it,
  the HEAD commit from `.git` (a couple of small files, no subprocess);
- `git` subprocesses (`tracked_blobs`, `renames`), only ever in the background or in
  an operator's command: what git tracks, and which files a commit range renamed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger("memlane.memory.project")

GIT_SECONDS = 10.0
"""The longest one background `git` call may take before it is given up (logged)."""
MAX_HASHED_BYTES = 1024 * 1024
"""The largest cited file whose content is hashed; a larger one is not recorded, and one
that grew past it has changed (its size alone says so)."""
GIT_PREFIX = "git:"
HASH_PREFIX = "sha256:"


def project_folder(namespace: str) -> Path | None:
    """The project folder a namespace names: an absolute path to a folder on this machine
    (how the proxy names a client's git root); None for any other namespace."""
    if not namespace or not os.path.isabs(namespace):
        return None
    path = Path(namespace)
    if ".." in path.parts or len(path.parts) < 2 or not path.is_dir():
        return None  # never the file system's root: a project is a folder in it
    return path


def inside(root: Path, relative: str) -> Path | None:
    """The file `relative` names in `root`, symlinks resolved, or None when it would be read
    outside the project (an absolute path, `..`, a link that points out)."""
    if not relative or os.path.isabs(relative) or ".." in Path(relative).parts:
        return None
    try:
        base = root.resolve()
        target = (base / relative).resolve()
    except (OSError, RuntimeError):
        return None
    return target if target.is_relative_to(base) and target != base else None


def git_blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes (`git hash-object`, without filters)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def identity(data: bytes, kind: str) -> str:
    """A file's content identity in the form `kind` names: `git:` or `sha256:`."""
    if kind == GIT_PREFIX:
        return GIT_PREFIX + git_blob_id(data)
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def git_dir(root: Path) -> Path | None:
    """The repository folder of a work tree: `.git`, or where a `.git` file points (a
    linked work tree, a submodule)."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.removeprefix("gitdir:").strip())
    return target if target.is_absolute() else (root / target)


def read_head(root: Path) -> str | None:
    """The commit HEAD points at, read from the repository's files (no subprocess); None
    without a repository or a commit."""
    repo = git_dir(root)
    if repo is None:
        return None
    try:
        head = (repo / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _is_sha(head) else None
    ref = head.removeprefix("ref:").strip()
    common = _common_dir(repo)
    for folder in (repo, common):
        try:
            value = (folder / ref).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if _is_sha(value):
            return value
    return _packed_ref(common, ref)


def _common_dir(repo: Path) -> Path:
    """Where a linked work tree's shared refs live (`commondir`), else the repository."""
    try:
        text = (repo / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return repo
    path = Path(text)
    return path if path.is_absolute() else (repo / path)


def _packed_ref(repo: Path, ref: str) -> str | None:
    try:
        lines = (repo / "packed-refs").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _is_sha(sha):
            return sha
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _git(root: Path, *args: str) -> str | None:
    """`git -C root args…` output, or None (no git, not a repository, a failure: logged)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            env=env,
            capture_output=True,
            timeout=GIT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("git %s in %s: %s", args[0], root, exc)
        return None
    if done.returncode != 0:
        log.info("git %s in %s: %s", args[0], root, done.stderr.decode(errors="replace")[:200])
        return None
    return done.stdout.decode("utf-8", errors="surrogateescape")


def tracked_paths(root: Path, names: list[str]) -> list[str]:
    """The files git tracks among `names` (paths relative to `root`), and for a bare file
    name the tracked files of that name anywhere in the project. A subprocess: background
    only."""
    specs: list[str] = []
    for name in names:
        specs.append(f":(literal){name}")
        if "/" not in name:
            specs.append(f":(glob)**/{name}")
    if not specs:
        return []
    out = _git(root, "ls-files", "-z", "--", *specs)
    return [p for p in (out or "").split("\0") if p]


def renames(root: Path, old: str, new: str) -> dict[str, str]:
    """The files renamed between two commits (old path -> new path), as git's rename
    detection sees them. A subprocess: background only; {} when git cannot tell."""
    out = _git(root, "diff", "--name-status", "-M", "-z", old, new)
    fields = (out or "").split("\0")
    moved: dict[str, str] = {}
    index = 0
    while index < len(fields) and fields[index]:
        status = fields[index]
        if status.startswith(("R", "C")) and index + 2 < len(fields):
            if status.startswith("R"):
                moved[fields[index + 1]] = fields[index + 2]
            index += 3
        else:
            index += 2
    return moved
