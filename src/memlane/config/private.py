"""Keep memlane's home to its owner: umask 077, a 0700 home, nothing others could plant.

The home holds every session's transcript, the memory files and the admin token. With
the usual umask 022 the home would be 0755 and its files 0644: any other account on the
machine could read them. So every process that writes the home (serve, the CLI, the
library, the MCP server) sets umask 077 when it opens the store, before anything is
created: the folders it makes are 0700 and the files 0600, SQLite's WAL and SHM and
git's objects included (both follow the umask).

What others can write is refused rather than repaired: a home, a config file or an
admin token that another account could have written (group- or world-writable, or
owned by someone else) may already hold a planted token or `allowed_hosts = ["*"]`, so
memlane stops and says which `chmod` makes it the owner's alone. A home that is merely
readable by others (made before this rule) is tightened to 0700 in place.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
HOME_MODE = 0o700
SHARED_BITS = stat.S_IWGRP | stat.S_IWOTH
"""Bits that let another account change a file or plant one in a folder."""

PLANTABLE_FILES = ("config.toml", "admin_token", "tenant_salt")
"""Files in the home whose content memlane trusts at start."""


class NotPrivateError(Exception):
    """A home or config file another account could have written; the message says the fix."""


def set_private_umask() -> None:
    """Files and folders this process creates from now on are its user's alone."""
    os.umask(PRIVATE_UMASK)


def make_home_private(home: Path) -> None:
    """Set the umask, refuse a home others could write, then create or tighten it to 0700."""
    set_private_umask()
    if home.exists():
        check_not_shared(home)
        for name in PLANTABLE_FILES:
            if (home / name).exists():
                check_not_shared(home / name)
        if stat.S_IMODE(home.stat().st_mode) & 0o077:
            home.chmod(HOME_MODE)  # readable by others from before: the owner's alone now
        return
    home.mkdir(mode=HOME_MODE, parents=True, exist_ok=True)


def check_not_shared(path: Path) -> None:
    """NotPrivateError when `path` (a folder or a file) is another user's or writable by one."""
    info = path.stat()
    fix = "chmod 700" if stat.S_ISDIR(info.st_mode) else "chmod 600"
    owner = getattr(os, "geteuid", None)
    if owner is not None and info.st_uid != owner():
        raise NotPrivateError(
            f"{path} belongs to another user (uid {info.st_uid}): anyone who owns it could "
            f"plant settings or a token in it; use a home of your own (MEMLANE_HOME or --home), "
            f"or take it over with `sudo chown -R $(id -u) {path} && {fix} {path}`"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & SHARED_BITS:
        raise NotPrivateError(
            f"{path} is writable by other users (mode {mode:o}): anyone on this machine could "
            f"plant settings or a token in it; make it yours alone with `{fix} {path}` "
            "and check its contents"
        )
