"""Rewrite the memory repository's history so that deleted memories leave no trace in it.

Deleting a memory file and committing removes it from the working tree and from
the newest commit, but every earlier commit still holds it, and commit messages
quote what was remembered (`+ The user's wife is named Anne`). `--purge` rewrites
the history: every commit is replayed without the files of the purged entries
(their names end in `__<id>.md`, wherever they lived), and their texts are
replaced by `[purged]` in every commit message. Then the old commits are dropped
for good: reflogs are expired and `git gc --prune=now` repacks without them, so
no loose or packed object keeps the text.

This changes every commit id from the first one that held a purged file: a
clone or a copy of the repository made before still has the old history.

The rewrite streams `git fast-export --no-data` (blobs stay where they are)
through a filter into `git fast-import --force`, one pass, no matter how many
commits the history has.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("memlane.memory.git")

PURGED = b"[purged]"
_DATA = re.compile(rb"^data (\d+)$")
_MODIFY = re.compile(rb"^M [0-7]+ \S+ (.+)$")
_DELETE = re.compile(rb"^D (.+)$")


class PurgeError(Exception):
    """git could not rewrite the history; the message says which step failed."""


@dataclass(frozen=True, slots=True)
class PurgeReport:
    files_dropped: int
    """File changes removed from the history (one file can appear in many commits)."""
    messages_scrubbed: int
    """Commit messages that quoted a purged text."""


def purge_history(root: Path, fact_ids: Iterable[str], texts: Iterable[str]) -> PurgeReport:
    """Remove the files of `fact_ids` from every commit and `texts` from every message.

    Raises `PurgeError` when git fails; the repository is left as git left it (the
    rewrite only replaces refs once fast-import succeeded).
    """
    ids = {i.encode() for i in fact_ids if i}
    needles = _needles(texts)
    if not (root / ".git").exists() or not ids:
        return PurgeReport(0, 0)
    exported = _git(
        root,
        "fast-export",
        "--all",
        "--no-data",
        "--reencode=yes",
        "--signed-tags=strip",
        "--tag-of-filtered-object=drop",
    )
    stream, report = filter_stream(exported, ids, needles)
    _git(root, "fast-import", "--force", "--quiet", stdin=stream)
    _git(root, "reflog", "expire", "--expire=now", "--all")
    _git(root, "gc", "--prune=now", "--quiet")
    (root / ".git" / "COMMIT_EDITMSG").unlink(missing_ok=True)
    return report


def filter_stream(
    stream: bytes, ids: set[bytes], needles: list[bytes]
) -> tuple[bytes, PurgeReport]:
    """The fast-export `stream` without changes to purged files, messages scrubbed."""
    out: list[bytes] = []
    dropped = scrubbed = 0
    for kind, chunk in _commands(stream):
        if kind == "data":
            clean = _scrub(chunk, needles)
            scrubbed += clean != chunk
            out.append(b"data %d\n" % len(clean) + clean)
            continue
        path = _changed_path(chunk)
        if path is not None and _purged(path, ids):
            dropped += 1
            continue
        out.append(chunk + b"\n")
    return b"".join(out), PurgeReport(dropped, scrubbed)


def _commands(stream: bytes) -> Iterator[tuple[str, bytes]]:
    """("line", a command line without its LF) or ("data", the exact bytes of a data block)."""
    at = 0
    end = len(stream)
    while at < end:
        newline = stream.find(b"\n", at)
        line = stream[at:] if newline < 0 else stream[at:newline]
        at = end if newline < 0 else newline + 1
        match = _DATA.match(line)
        if match is None:
            yield "line", line
            continue
        size = int(match.group(1))
        yield "data", stream[at : at + size]
        at += size
        if stream[at : at + 1] == b"\n":  # the optional LF after a data block
            at += 1


def _changed_path(line: bytes) -> bytes | None:
    match = _MODIFY.match(line) or _DELETE.match(line)
    if match is None:
        return None
    path = match.group(1)
    if path.startswith(b'"') and path.endswith(b'"'):  # C-quoted: only the name matters
        path = path[1:-1]
    return path


def _purged(path: bytes, ids: set[bytes]) -> bool:
    name = path.rsplit(b"/", 1)[-1]
    if not name.endswith(b".md") or b"__" not in name:
        return False
    return name[:-3].rsplit(b"__", 1)[1] in ids


def _needles(texts: Iterable[str]) -> list[bytes]:
    """The forms a text takes in commit messages: as written, on one line, and cut short."""
    found: set[bytes] = set()
    for text in texts:
        stripped = text.strip()
        if len(stripped) < 4:  # too short to be told apart from ordinary words
            continue
        flat = " ".join(stripped.split())
        for form in (stripped, flat, flat[:199] if len(flat) > 200 else ""):
            if form:
                found.add(form.encode("utf-8"))
    return sorted(found, key=len, reverse=True)


def _scrub(message: bytes, needles: list[bytes]) -> bytes:
    for needle in needles:
        message = message.replace(needle, PURGED)
    return message


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, input=stdin, capture_output=True, check=False
    )
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        raise PurgeError(f"git {args[0]} failed while purging the memory history: {detail}")
    return done.stdout
