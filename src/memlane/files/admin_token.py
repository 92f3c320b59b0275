"""The admin token: configured, or generated once into the home and read from there.

memlane's admin API (`/v1/memlane/…`) reads and rewrites every session, so it always
needs a token, loopback included: any local process or web page could otherwise drive
it. With `MEMLANE_ADMIN_TOKEN` unset, the first start writes a random token to
`$MEMLANE_HOME/admin_token` (mode 0600: only the user can read it), and the CLI and
the user's own scripts read it from there.
"""

from __future__ import annotations

from pathlib import Path

from memlane.files.home_secret import ensure_secret, read_secret

TOKEN_FILE = "admin_token"
MIN_CHARS = 16


class AdminTokenError(ValueError):
    """A configured token that cannot protect anything; the message says what to set."""


def token_path(home: Path) -> Path:
    return home / TOKEN_FILE


SETTING = "the admin_token setting (MEMLANE_ADMIN_TOKEN or config.toml)"


def check(token: str, *, source: str = SETTING) -> str:
    """A token, stripped, or AdminTokenError when it is too weak.

    Every source meets the same minimum: the setting (environment or config file) and
    the file in the home, which a hand-written or planted one-character token would
    otherwise slip through."""
    stripped = token.strip()
    if len(stripped) < MIN_CHARS or any(c.isspace() for c in stripped):
        raise AdminTokenError(
            f"the admin token in {source} must be at least {MIN_CHARS} characters with no "
            "spaces; "
            + (
                "unset it to have memlane generate one"
                if source == SETTING
                else f"delete {source} to have memlane generate a new one"
            )
        )
    return stripped


def read(home: Path) -> str | None:
    """The generated token, if this home has one."""
    return read_secret(token_path(home))


def ensure(home: Path, configured: str | None) -> str:
    """The token the admin API requires: the configured one, else this home's generated one
    (AdminTokenError when either is too weak)."""
    if configured is not None and configured != "":
        return check(configured)
    path = token_path(home)
    return check(ensure_secret(path), source=str(path))
