"""Secrets memlane generates once into its home: readable by the user only (mode 0600).

The admin token and the tenancy salt are both made this way: on first use a random
value is written whole under a temporary name, then linked into place, so a process
starting at the same moment (another worker, the CLI) reads a complete secret or none,
and the first link wins for everyone; every later start reads it back.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def read_secret(path: Path) -> str | None:
    """The secret in `path`, if there is one."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def ensure_secret(path: Path) -> str:
    """The secret in `path`, generated (32 random bytes, URL-safe) when there is none."""
    existing = read_secret(path)
    if existing is not None:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process linked its secret first: theirs is the one
            theirs = read_secret(path)
            if theirs is None:
                raise OSError(
                    f"{path} holds no secret: remove it to have memlane make a new one"
                ) from None
            return theirs
    finally:
        tmp.unlink(missing_ok=True)
    return value
