"""A session's human-editable state files: todo.md, pinned.md, summary.md, and AGENTS.md.

They live in the session's folder (`files.paths.session_dir`), so a person can
open and edit them between turns; the proxy reads them on every turn. Text is
normalised on read and on write: some clients (PowerShell's `ConvertTo-Json`,
HTTP headers that cannot carry a newline) hand over `\\n` and `\\u2019` escapes
instead of the characters, and the model should read the characters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from memlane.files.atomic import write_atomic
from memlane.files.paths import session_dir

STATE_FILES = {"todo": "todo.md", "pinned": "pinned.md", "summary": "summary.md"}
"""State name -> file name in the session folder."""
SPEC_APPROVED_FILE = ".spec-approved"
AGENTS_FILE = "AGENTS.md"
MAX_FILE_BYTES = 1_000_000
"""A state file larger than this is read only up to here (a human pasted a log)."""

_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_LINE_ESCAPES = {"\\r\\n": "\n", "\\n": "\n", "\\r": "\n", "\\t": "\t", '\\"': '"'}


def normalize_escapes(text: str) -> str:
    """Turn escaped sequences back into the characters they stand for.

    `\\uXXXX` is always decoded (nobody means it literally in a TODO). Line
    escapes (`\\n`, `\\t`, `\\"`) are decoded only when the text has no real line
    break: that is the shape of a JSON-escaped blob, while a multi-line note that
    mentions `\\n` (in code, say) is left alone. A whole text that is one JSON
    string literal (`"a\\nb"`) is decoded as JSON.
    """
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"' and "\n" not in stripped:
        try:
            decoded = json.loads(stripped)
        except ValueError:
            decoded = None
        if isinstance(decoded, str):
            return decoded
    text = _UNICODE_ESCAPE.sub(_decode_unicode, text)
    if "\n" not in text and "\\" in text:
        for escaped, plain in _LINE_ESCAPES.items():
            text = text.replace(escaped, plain)
    return text


def _decode_unicode(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate half cannot be written as UTF-8
        return match.group(0)
    return chr(code)


class FileTexts:
    """State texts as files under `sessions_root/<safe key>/`."""

    def __init__(self, sessions_root: Path) -> None:
        self.root = sessions_root

    def folder(self, key: str, tenant: str = "") -> Path:
        return session_dir(self.root, key, tenant)

    def read(self, key: str, tenant: str = "") -> dict[str, str]:
        """Every state text present for the session, normalised; absent files are left out.

        One listing of the folder, then only the files that are there are opened
        (the proxy reads these on every turn; most sessions have one file or none).
        """
        folder = str(self.folder(key, tenant))
        try:
            present = set(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        out: dict[str, str] = {}
        for name, file_name in STATE_FILES.items():
            text = read_text(os.path.join(folder, file_name)) if file_name in present else None
            if text is not None:
                out[name] = normalize_escapes(text)
        if SPEC_APPROVED_FILE in present:
            out["spec_approved"] = "1"
        return out

    def write(
        self, key: str, name: str, value: str | None, tenant: str = "", *, durable: bool = True
    ) -> None:
        """Write one state text atomically (None or empty removes the file); `durable=False`
        leaves syncing it to the OS (`write_atomic`)."""
        folder = self.folder(key, tenant)
        if name == "spec_approved":
            path = folder / SPEC_APPROVED_FILE
            value = "1" if value else None
        else:
            path = folder / STATE_FILES[name]
            value = normalize_escapes(value) if value else None
        if value is None:
            path.unlink(missing_ok=True)
            return
        write_atomic(path, value, durable=durable)

    def remove(self, key: str, tenant: str = "") -> None:
        """Forget the session's folder and every file in it."""
        shutil.rmtree(self.folder(key, tenant), ignore_errors=True)


def read_agents_md(harness_root: Path | None) -> str:
    """The harness's AGENTS.md, normalised, or empty when unset or missing."""
    if harness_root is None:
        return ""
    text = read_text(harness_root.expanduser() / AGENTS_FILE)
    return normalize_escapes(text) if text else ""


def read_text(path: str | os.PathLike[str]) -> str | None:
    """The file's first `MAX_FILE_BYTES`, as text; None when there is no such file.

    Plain `os` calls, read to the file's size: the proxy reads a session's texts in front
    of every request, and `Path.open().read(MAX_FILE_BYTES)` (a buffered reader that
    allocates the whole cap on each read) took 60 µs of it where this takes 8.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, min(size, MAX_FILE_BYTES) or MAX_FILE_BYTES)
    except IsADirectoryError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")
