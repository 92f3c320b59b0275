"""`meta.json` in a session's folder: the human-readable copy of its index metadata.

Writes are atomic (`files.atomic.write_atomic`), so a reader never sees half a
file. A file that is not valid JSON, or not an object, is
treated as missing with a warning; the next successful indexing rewrites it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memlane.files.atomic import write_atomic
from memlane.files.paths import session_dir

log = logging.getLogger("memlane.sessions.meta")

META_FILE = "meta.json"


class CorruptMeta(Exception):
    """A meta.json exists but cannot be used; the message says which file and why."""


def meta_path(sessions_root: Path, key: str, tenant: str = "") -> Path:
    return session_dir(sessions_root, key, tenant) / META_FILE


def load_meta(path: Path) -> dict[str, Any]:
    """The file's content; raises FileNotFoundError when absent, CorruptMeta when unusable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptMeta(f"{path} is not valid JSON ({exc}); it will be rewritten") from exc
    if not isinstance(data, dict):
        raise CorruptMeta(f"{path} does not hold a JSON object; it will be rewritten")
    return data


def read_meta(path: Path) -> dict[str, Any] | None:
    """The file's content, or None when it is missing or corrupt (logged as a warning)."""
    try:
        return load_meta(path)
    except FileNotFoundError:
        return None
    except CorruptMeta as exc:
        log.warning("%s", exc)
        return None


def write_meta(path: Path, meta: Mapping[str, Any]) -> None:
    """Replace the file atomically: readers see the old file or the new one, never a mix."""
    write_atomic(path, json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
