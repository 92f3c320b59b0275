"""Rewrite the memory repository's history so that deleted memories leave no trace in it.

Deleting a memory file and committing removes it from the working tree and from
the newest commit, but every earlier commit still holds it, and commit messages
quote what was remembered (`+ The user's wife is named Anne`). `--purge` rewrites
the history: every commit is replayed without the files of the purged entries, and
every text those entries ever had is replaced by `[purged]` in every commit message:
the texts the caller gives and those of every version of their files in the history
(`memory edit` keeps the id and changes the text, and so does a person's edit of the
file, whose earlier text the commit messages quote too).

An entry's files are every path that ever held it: those named `<timestamp>__<id>.md`
(wherever they lived), and any other path one of whose versions names the id in its
front matter (`files.entry_lookup`), in any commit or in the index: a file a person
renamed (`sister.md`), moved to another folder or whose `id:` line they changed. Every
version of such a path goes, those from before it held the entry too (the file a
person renamed or re-identified is the same memory). Telling which paths those are
reads every version of every other file in the history once (`git cat-file --batch`,
streamed, one process): as many bytes as the history holds, as the repack at the end
costs anyway. A version git cannot read (a damaged repository) may have held the entry:
the purge stops before it changed anything, saying so (fast-import could not replay
such a history either).

Then the old commits are dropped for good: the index lets go of the files (an index
entry keeps its blob), reflogs are expired and `git gc --prune=now` repacks without
them, so no loose or packed object keeps the text. A last, empty commit on HEAD's
branch says what was purged.

The rewrite leaves the working tree alone: the caller runs it while the files are still
there, and removes them afterwards (before anything else commits, or a commit would
take them back), so a purge whose git step fails has removed nothing and can run again.

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
import tempfile
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memlane.files import git_import
from memlane.files.entry_lookup import HEAD_BYTES, front_matter_ids, name_id
from memlane.files.memory_files import entry_text

log = logging.getLogger("memlane.memory.git")

PURGED = b"[purged]"
MIN_NEEDLE_CHARS = 4
"""A text shorter than this is not scrubbed: it cannot be told apart from ordinary words."""
_DATA = re.compile(rb"^data (\d+)$")
_MODIFY = re.compile(rb"^M ([0-7]+) (\S+) (.+)$")
_GITLINK = b"160000"
"""A submodule's commit, not a blob."""
_ESCAPES = {b"a": 7, b"b": 8, b"f": 12, b"n": 10, b"r": 13, b"t": 9, b"v": 11}
_DELETE = re.compile(rb"^D (.+)$")


class PurgeError(Exception):
    """A purge stopped before its end. Raised here, git could not rewrite the history (the
    message says which step failed); raised by the engine's purges (`forget_memory`,
    sessions' `delete`), the message also says what is done and what finishes it."""


@dataclass(frozen=True, slots=True)
class PurgeReport:
    files_dropped: int
    """File changes removed from the history (one file can appear in many commits)."""
    messages_scrubbed: int
    """Commit messages that quoted a purged text."""


def purge_history(
    root: Path, fact_ids: Iterable[str], texts: Iterable[str], *, message: str | None = None
) -> PurgeReport:
    """Remove the files of `fact_ids` from every commit, and from every message `texts` and
    every text their files held; `message`: that of the empty commit that records it.

    Raises `PurgeError` when git fails. Until fast-import succeeded nothing has changed;
    after it, running the same purge again finishes it.
    """
    ids = {i.encode() for i in fact_ids if i}
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
    held = _held_paths(root, exported, ids)
    earlier = _entry_texts(root, _versions_of(exported, ids, held))
    stream, report = filter_stream(exported, ids, _needles([*texts, *earlier]), held)
    _git(root, "fast-import", "--force", "--quiet", stdin=stream + _record(root, exported, message))
    _untrack(root, ids, held)
    _git(root, "reflog", "expire", "--expire=now", "--all")
    _git(root, "gc", "--prune=now", "--quiet")
    (root / ".git" / "COMMIT_EDITMSG").unlink(missing_ok=True)
    return report


def _held_paths(root: Path, stream: bytes, ids: set[bytes]) -> frozenset[bytes]:
    """The paths not named for a purged entry one of whose versions (in a commit of the
    fast-export `stream`, or in the index) holds one. Each distinct version is read once,
    only its front matter looked at; raises `PurgeError` when git cannot read one."""
    at: dict[bytes, set[bytes]] = {}  # blob -> the paths it was at
    for kind, chunk in _commands(stream):
        match = _MODIFY.match(chunk) if kind == "line" else None
        if match is not None and match.group(1) != _GITLINK:
            path = _unquoted(match.group(3))
            if not _purged(path, ids):
                at.setdefault(match.group(2), set()).add(path)
    for entry in _git(root, "ls-files", "-s", "-z").split(b"\0"):  # staged, not committed
        info, _, path = entry.partition(b"\t")
        fields = info.split()
        if path and len(fields) == 3 and fields[0] != _GITLINK and not _purged(path, ids):
            at.setdefault(fields[1], set()).add(path)
    wanted = {i.decode() for i in ids}
    held: set[bytes] = set()
    unread: list[bytes] = []
    for blob, data in _blobs(root, list(at)):
        if data is None:
            unread.append(blob)
            continue
        named = front_matter_ids(data[:HEAD_BYTES])
        for path in at[blob]:
            name = path.rsplit(b"/", 1)[-1].decode("utf-8", "replace")
            if (named or {name_id(name)}) & wanted:
                held.add(path)
    if unread:
        paths = sorted({p.decode("utf-8", "replace") for blob in unread for p in at[blob]})
        raise PurgeError(
            f"git cannot read {len(unread)} version(s) of files in the memory's history "
            f"({', '.join(paths[:5])}), any of which may hold it: the repository is damaged "
            "(`git fsck` says more)"
        )
    return frozenset(held)


def _versions_of(stream: bytes, ids: set[bytes], held: Collection[bytes] = ()) -> list[bytes]:
    """The blob ids of every version the purged files had in a `--no-data` fast-export
    `stream`, in order of appearance."""
    found: dict[bytes, None] = {}
    for kind, chunk in _commands(stream):
        match = _MODIFY.match(chunk) if kind == "line" else None
        if match is not None and _dropped(_unquoted(match.group(3)), ids, held):
            found[match.group(2)] = None
    return list(found)


def _entry_texts(root: Path, blobs: list[bytes]) -> list[str]:
    """The entry text each of these blobs holds (those git can read)."""
    return [entry_text(data) for _, data in _blobs(root, blobs) if data is not None]


def _blobs(root: Path, blobs: list[bytes]) -> Iterator[tuple[bytes, bytes | None]]:
    """Each blob with its content (None: git cannot read it), streamed from one `git
    cat-file --batch`: one blob in memory at a time, however large the history."""
    if not blobs:
        return
    with tempfile.TemporaryFile() as asked, tempfile.TemporaryFile() as errors:
        asked.write(b"".join(blob + b"\n" for blob in blobs))
        asked.seek(0)
        try:
            process = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=root,
                env=_env(),
                stdin=asked,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        except OSError as exc:
            raise PurgeError(f"cannot run git to purge the memory history: {exc}") from None
        out = process.stdout
        assert out is not None
        done = False
        try:
            for blob in blobs:
                header = out.readline().split()
                if len(header) != 3:  # `<id> missing`
                    yield blob, None
                    continue
                data = out.read(int(header[2]))
                out.read(1)  # the LF after the content
                yield blob, data if header[1] == b"blob" else None
            done = True
        finally:
            if not done:  # the caller stopped early, or failed
                process.kill()
            out.close()
            process.wait()
        if process.returncode != 0:
            errors.seek(0)
            detail = errors.read().decode("utf-8", "replace").strip()[:300]
            raise PurgeError(f"git cat-file failed while purging the memory history: {detail}")


def _record(root: Path, exported: bytes, message: str | None) -> bytes:
    """A last commit on HEAD's branch, its tree unchanged, whose message says what was
    purged; none without a message or a branch the stream holds (a detached HEAD, no
    commit yet). No `from`: fast-import goes on from the branch as the stream left it."""
    branch = git_import.head_branch(root)
    if message is None or branch is None:
        return b""
    named = re.compile(rb"^(?:commit|reset) " + re.escape(branch.encode()) + rb"$", re.MULTILINE)
    if named.search(exported) is None:
        return b""
    return git_import.import_stream(branch, False, message, [])


def _untrack(root: Path, ids: set[bytes], held: Collection[bytes]) -> None:
    """Take the purged files out of the index, where they may still be (the caller removes
    them from the working tree afterwards): an index entry keeps its blob from `gc`."""
    tracked = _git(root, "ls-files", "-z").split(b"\0")
    purged = [path for path in tracked if path and _dropped(path, ids, held)]
    if purged:
        stdin = b"".join(path + b"\0" for path in purged)
        _git(root, "update-index", "-z", "--force-remove", "--stdin", stdin=stdin)


def filter_stream(
    stream: bytes, ids: set[bytes], needles: list[bytes], held: Collection[bytes] = ()
) -> tuple[bytes, PurgeReport]:
    """The fast-export `stream` without changes to purged files (named for `ids`, or
    among the `held` paths), messages scrubbed."""
    out: list[bytes] = []
    dropped = scrubbed = 0
    for kind, chunk in _commands(stream):
        if kind == "data":
            clean = _scrub(chunk, needles)
            scrubbed += clean != chunk
            out.append(b"data %d\n" % len(clean) + clean)
            continue
        path = _changed_path(chunk)
        if path is not None and _dropped(path, ids, held):
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
    modified = _MODIFY.match(line)
    if modified is not None:
        return _unquoted(modified.group(3))
    deleted = _DELETE.match(line)
    return _unquoted(deleted.group(1)) if deleted is not None else None


def _unquoted(path: bytes) -> bytes:
    """A path as fast-export writes it, C-quoted where it must be, as the bytes it names."""
    if not (len(path) >= 2 and path.startswith(b'"') and path.endswith(b'"')):
        return path
    quoted, out, at = path[1:-1], bytearray(), 0
    while at < len(quoted):
        char = quoted[at : at + 1]
        at += 1
        if char != b"\\" or at >= len(quoted):
            out += char
            continue
        escaped = quoted[at : at + 1]
        if escaped.isdigit() and quoted[at : at + 3].isdigit():
            out.append(int(quoted[at : at + 3], 8) & 0xFF)
            at += 3
            continue
        out.append(_ESCAPES.get(escaped, escaped[0]))
        at += 1
    return bytes(out)


def _dropped(path: bytes, ids: set[bytes], held: Collection[bytes]) -> bool:
    return _purged(path, ids) or path in held


def _purged(path: bytes, ids: set[bytes]) -> bool:
    name = path.rsplit(b"/", 1)[-1]
    if not name.endswith(b".md") or b"__" not in name:
        return False
    return name[:-3].rsplit(b"__", 1)[1] in ids


def _needles(texts: Iterable[str]) -> list[bytes]:
    """The forms a text takes in commit messages: as written, on one line, and cut short;
    the longest first, so a text that holds another is replaced whole."""
    found: set[bytes] = set()
    for text in texts:
        stripped = text.strip()
        if len(stripped) < MIN_NEEDLE_CHARS:
            continue
        flat = " ".join(stripped.split())
        for form in (stripped, flat, flat[:199] if len(flat) > 200 else ""):
            if form:  # as messages hold it
                found.add(git_import.commit_message(form).encode("utf-8"))
    return sorted(found, key=len, reverse=True)


def _scrub(message: bytes, needles: list[bytes]) -> bytes:
    for needle in needles:
        message = message.replace(needle, PURGED)
    return message


def _env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, env=_env(), input=stdin, capture_output=True, check=False
        )
    except OSError as exc:  # no git at all: the purge fails as when git does
        raise PurgeError(f"cannot run git to purge the memory history: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        raise PurgeError(f"git {args[0]} failed while purging the memory history: {detail}")
    return done.stdout
