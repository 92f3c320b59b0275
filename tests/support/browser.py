"""Headless Chromium for the inspector's browser tests and screenshots.

Debian's `chromium` package, driven by Playwright's Python package through
`executable_path`: Playwright's own browser download is never used (it needs
the network). `scripts/test-clients` installs the package when it is missing.
The flags keep Chromium from calling Google's services at start (this machine
has no network but loopback) and let it run as root in CI.
"""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> Path | None:
    """Debian's Chromium, if installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


MISSING = (
    "Debian's chromium is not installed: run scripts/test-clients (as root it installs it with "
    "apt-get), or `apt-get install chromium`"
)
