"""The admin token: configured, or generated once into the home and read from there.

memlane's admin API (`/v1/memlane/…`) reads and rewrites every session, so it always
needs a token, loopback included: any local process or web page could otherwise drive
it. With `MEMLANE_ADMIN_TOKEN` unset, the first start writes a random token to
`$MEMLANE_HOME/admin_token` (mode 0600: only the user can read it), and the CLI and
the user's own scripts read it from there.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE = "admin_token"
MIN_CHARS = 16


class AdminTokenError(ValueError):
    """A configured token that cannot protect anything; the message says what to set."""


def token_path(home: Path) -> Path:
    return home / TOKEN_FILE


def check(token: str) -> str:
    """A configured token, stripped, or AdminTokenError when it is too weak."""
    stripped = token.strip()
    if len(stripped) < MIN_CHARS or any(c.isspace() for c in stripped):
        raise AdminTokenError(
            f"MEMLANE_ADMIN_TOKEN must be at least {MIN_CHARS} characters with no spaces; "
            "unset it to have memlane generate one"
        )
    return stripped


def read(home: Path) -> str | None:
    """The generated token, if this home has one."""
    try:
        text = token_path(home).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def ensure(home: Path, configured: str | None) -> str:
    """The token the admin API requires: the configured one, else this home's generated one."""
    if configured is not None and configured != "":
        return check(configured)
    existing = read(home)
    if existing is not None:
        return existing
    token = secrets.token_urlsafe(32)
    path = token_path(home)
    home.mkdir(parents=True, exist_ok=True)
    # Written whole under a temporary name, then linked into place: a process starting at
    # the same moment (another worker, the CLI) reads a complete token or none, and the
    # first link wins for everyone.
    tmp = home / f".{TOKEN_FILE}.{secrets.token_hex(4)}.tmp"
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return read(home) or token
    finally:
        tmp.unlink(missing_ok=True)
    return token
