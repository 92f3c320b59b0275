"""A commit of some paths as one `git fast-import` stream: one pack, not a file per blob.

Committing the paths a change touched through git's plumbing (`update-index`,
`write-tree`, `commit-tree`, `update-ref`) cost five processes a commit, and
`update-index` wrote each file as a loose object: a file created per blob, most of
git's time for a burst of turns. `fast-import` takes the files as they are on disk
and the commit in one stream, writes the blobs into one pack, builds the new trees
from the parent's and moves the branch; the index is then set to the same blobs,
whose ids are computed here (`update-index --index-info`, which reads no file), so
`git status` in the memory folder shows the tree as clean as before. Those index
entries carry no file times: the next whole-tree commit (`git add -A`, every ten
minutes) reads those files once to see they are unchanged, writing nothing.

Every fast-import run leaves a pack; `PACKS_BEFORE_REPACK` of them are combined by
a geometric repack, whose work follows the new objects, not the whole history.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKS_BEFORE_REPACK = 32
"""Packs in the repository past which a commit combines them (`git repack --geometric`):
each fast-import run writes one, and git looks an object up in every pack."""
IDENTITY = b"memlane <memlane@localhost>"


@dataclass(frozen=True, slots=True)
class Change:
    """One path as it is to be committed: its file's mode, blob id and bytes, or gone."""

    path: str
    mode: str
    blob: str
    data: bytes | None  # None: the path is removed

    @property
    def removed(self) -> bool:
        return self.data is None


def importable(path: str) -> bool:
    """Whether fast-import takes the path as it is: it must not be quoted (a path starting
    with a double quote or holding a line break is C-quoted in its stream)."""
    return bool(path) and not path.startswith('"') and "\n" not in path and "\0" not in path


def blob_id(data: bytes, object_format: str) -> str:
    """The id git gives a blob of these bytes (`git hash-object`)."""
    digest = hashlib.new(object_format)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def changes(root: Path, paths: Collection[str], object_format: str) -> list[Change]:
    """Each path as it is on disk, in path order: its file's mode, blob id and bytes, or
    removed when no file is there."""
    found: list[Change] = []
    none = "0" * hashlib.new(object_format).digest_size * 2
    for path in sorted(paths):
        read = _read(root / path)
        if read is None:
            found.append(Change(path, "0", none, None))
        else:
            mode, data = read
            found.append(Change(path, mode, blob_id(data, object_format), data))
    return found


def _read(path: Path) -> tuple[str, bytes] | None:
    """A file's git mode and bytes (a link's target); None when there is no file there."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return "120000", os.fsencode(os.readlink(path))
        if not stat.S_ISREG(info.st_mode):
            return None
        mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
        return mode, path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def commit_message(text: str) -> str:
    """`text` as every memlane commit holds it: a NUL cannot be in a command's arguments
    (`git commit -m`), and messages quote memories, which may hold one (so a purge looks
    for their texts in this form too: `git_purge`)."""
    return text.replace("\x00", "\ufffd")


def import_stream(
    branch: str, parent: bool, message: str, found: Sequence[Change], *, when: float | None = None
) -> bytes:
    """The fast-import stream of one commit on `branch` (from its current commit when
    `parent`), the changed files' bytes inline, ending with `done`."""
    text = message.encode("utf-8")
    stamp = int(time.time() if when is None else when)
    parts = [
        b"commit %s\ncommitter %s %d +0000\ndata %d\n%s\n"
        % (branch.encode(), IDENTITY, stamp, len(text), text)
    ]
    if parent:
        parts.append(b"from %s^0\n" % branch.encode())
    for change in found:
        name = change.path.encode("utf-8", "surrogateescape")
        if change.data is None:
            parts.append(b"D %s\n" % name)
        else:
            parts.append(
                b"M %s inline %s\ndata %d\n%s\n"
                % (change.mode.encode(), name, len(change.data), change.data)
            )
    parts.append(b"\ndone\n")
    return b"".join(parts)


def index_info(found: Sequence[Change]) -> bytes:
    """`update-index -z --index-info` input setting the index to the committed blobs (mode
    0 removes a path)."""
    return b"".join(
        b"%s %s\t%s\0"
        % (c.mode.encode(), c.blob.encode(), c.path.encode("utf-8", "surrogateescape"))
        for c in found
    )


def head_branch(root: Path) -> str | None:
    """The branch HEAD names (`refs/heads/...`), read from `.git/HEAD`; None when HEAD is
    detached or not a plain file (a worktree's `.git` file, say)."""
    try:
        head = (root / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref: refs/heads/"):
        return None
    branch = head.removeprefix("ref: ")
    return branch if importable(branch) and " " not in branch else None


def detached(root: Path) -> bool:
    """Whether HEAD names a commit, not a branch (`git checkout <commit>`); False when that
    cannot be read (no repository, a worktree's `.git` file)."""
    try:
        head = (root / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return not head.startswith("ref: ")


def pack_count(root: Path) -> int:
    """How many packs the repository holds."""
    try:
        return sum(
            1 for name in os.listdir(root / ".git" / "objects" / "pack") if name.endswith(".pack")
        )
    except OSError:
        return 0
