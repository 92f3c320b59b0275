"""Finding the memlane proxy that runs on this home, or starting one in the background.

`memlane serve` writes `serve.json` in its home (its pid, address and upstreams) and
removes it when it stops. `memlane run` and `memlane chat` read it, so a command
finds the proxy a user already started, with the upstreams it was started with.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memlane.config import Settings

START_TIMEOUT = 60.0
"""How long `memlane run` waits for a proxy it started to listen."""
SERVE_LOG = "serve.log"


@dataclass(frozen=True)
class Running:
    url: str
    """`http://127.0.0.1:8100`."""
    pid: int
    upstream_url: str | None = None
    anthropic_upstream_url: str | None = None


def running_proxy(settings: Settings) -> Running | None:
    """The live proxy `serve.json` names on this home, if one listens."""
    from memlane.proxy.status import pid_alive, serve_file

    try:
        data = json.loads(serve_file(settings).read_text(encoding="utf-8"))
        url, pid = str(data["url"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not pid_alive(pid) or not _listens(url):
        return None
    return Running(
        url,
        pid,
        _text(data.get("upstream_url")),
        _text(data.get("anthropic_upstream_url")),
    )


def installed_memlane() -> str:
    """The absolute path of the `memlane` command this process belongs to (for client
    configuration that starts it: a bare name fails where PATH differs)."""
    beside = Path(sys.executable).parent / "memlane"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("memlane")
    if found:
        return str(Path(found).absolute())
    return str(Path(sys.argv[0]).absolute())


def start_proxy(settings: Settings, config_file: Path | None) -> Running:
    """Start `memlane serve` for this home in the background and wait until it listens.

    Raises RuntimeError, naming the log file, when it does not come up."""
    home = settings.home_path
    home.mkdir(parents=True, exist_ok=True)
    log = home / SERVE_LOG
    command = [installed_memlane(), "--home", str(home)]
    if config_file is not None:
        command += ["--config", str(config_file)]
    command.append("serve")
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # it outlives this command, and Ctrl-C in the agent
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = running_proxy(settings)
        if found is not None and found.pid == process.pid:
            return found
        if process.poll() is not None:
            raise RuntimeError(
                f"memlane serve stopped at start (exit {process.returncode}); see {log}"
            )
        time.sleep(0.2)
    raise RuntimeError(f"memlane serve did not listen within {START_TIMEOUT:g} s; see {log}")


def _listens(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 1):
            return True
    except OSError:
        return False


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
