"""What a file under the memory root must be before memlane reads it as a memory.

A person may write anything into the memory folder, and what memlane reads there goes
into the index, into recall (upstream, in every session) and into file names. So:

- an entry id is `ENTRY_ID`: what memlane mints (`new_id`: 32 hex digits; a file with
  no id anywhere: `f` and 31 more) and what a file name can carry (`<timestamp>__<id>.md`,
  letters, digits, `.`, `_`, `-`), starting with a letter or a digit, so no id is a path
  (`../x`), a glob (`*`), an option to git (`-x`) or longer than a file name allows;
- an entry file is a regular file, opened without following a symbolic link, below
  the memory root with no link on the way (`read_entry`): a link to `/etc/passwd` is
  not a memory, nor is a file in a linked folder;
- an entry file is at most `max_entry_bytes` bytes.

Each check raises `ValueError` saying why; `files.memory_files` names the file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
ENTRY_ID = re.compile(ID_PATTERN)

TEXT_CHARS_FLOOR = 64_000
"""The longest text memlane writes into an entry whatever its settings, in characters:
the default `memory_message_chars` (a remembered turn is cut there), above a `memory
add` or `edit` text (20,000) and a rolling summary (2,000)."""
MARKER_CHARS = 1_000
"""Room for what memlane adds to a cut turn (its marker) and for redaction's labels."""
HEAD_BYTES = 64 * 1024
"""Room for the front matter: ids, times, provenance and up to 8 cited files' paths."""


def max_entry_bytes(message_chars: int = TEXT_CHARS_FLOOR) -> int:
    """The largest entry file memlane reads: the largest it could have written itself, a
    remembered turn of `memory_message_chars` characters (or `TEXT_CHARS_FLOOR`, when
    more) and its marker, at UTF-8's 4 bytes a character, under its front matter. About
    314 KiB by default. A bigger file is no memory memlane wrote nor one recall could
    use (one would fill a request's context on its own): it is skipped, not indexed."""
    return 4 * (max(message_chars, TEXT_CHARS_FLOOR) + MARKER_CHARS) + HEAD_BYTES


MAX_ENTRY_BYTES = max_entry_bytes()
"""`max_entry_bytes` with the default settings."""


def valid_id(value: object) -> bool:
    """Whether `value` is an entry id memlane may use in a file name (`ENTRY_ID`)."""
    return isinstance(value, str) and ENTRY_ID.fullmatch(value) is not None


def check_id(value: str, field: str = "id") -> str:
    """`value` when it is an entry id; `ValueError` otherwise."""
    if not valid_id(value):
        raise ValueError(
            f"{field} {value[:80]!r} is not a memory id (up to 128 letters, digits, '.', "
            "'_' or '-', starting with a letter or a digit)"
        )
    return value


def read_entry(path: Path, root: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the entry file at `path` and its status, read only when it is a
    regular file (not a link to one) below `root` with no linked folder on the way, of
    at most `limit` bytes; `ValueError` saying why otherwise, `OSError` when it cannot
    be read."""
    if path.is_symlink():
        raise ValueError(f"is a symbolic link (to {os.readlink(path)}): not followed")
    _inside(path.parent, root)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if path.is_symlink():  # made one since the check above
            raise ValueError("is a symbolic link: not followed") from None
        raise exc
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("is not a regular file")
        if status.st_size > limit:
            raise ValueError(_too_big(status.st_size, limit))
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew since
        raise ValueError(_too_big(len(data), limit))
    return data, status


def _inside(folder: Path, root: Path) -> None:
    """`ValueError` unless `folder` is `root` or below it with no symbolic link on the way
    (a few `lstat`s: resolving both paths cost more than reading a small entry)."""
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        raise ValueError(f"lies outside the memory folder {root}: not read") from None
    current = root
    for part in parts:
        current = current / part
        if part == ".." or stat.S_ISLNK(os.lstat(current).st_mode):
            raise ValueError(
                f"lies in {current}, which leads outside the memory folder {root}: not followed"
            )


def _too_big(size: int, limit: int) -> str:
    return (
        f"{size:,} bytes, more than the {limit:,} an entry file may hold (memlane writes "
        "none bigger: a turn is cut to memory_message_chars)"
    )
