"""Secrets memlane generates once into its home: readable by the user only (mode 0600).

The admin token and the tenancy salt are both made this way: on first use a random
value is written with `O_EXCL` (two processes starting together agree on the first
file written), and every later start reads it back.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

RACE_READS = 100
"""Reads (10 ms apart) of a secret another process is writing at the same moment."""


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
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: theirs is the one
        for _ in range(RACE_READS):
            theirs = read_secret(path)
            if theirs is not None:
                return theirs
            time.sleep(0.01)
        raise OSError(f"{path} holds no secret: remove it to have memlane make a new one") from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value
