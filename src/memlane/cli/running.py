"""Finding the memlane proxy that runs on this home, or starting one in the background.

`memlane serve` writes `serve.json` in its home (its pid, address and upstreams) and
removes it when it stops. `memlane run` and `memlane chat` read it, so a command
finds the proxy a user already started, with the upstreams it was started with.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from memlane.config import LoadedSettings, Settings
from memlane.files.serve_file import read_serve_file

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
    data = read_serve_file(settings.home_path)
    if data is None or not isinstance(data.get("url"), str):
        return None
    url, pid = str(data["url"]), int(data["pid"])
    if not _listens(url):
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


PLAIN_HOME = Path("~/.local/share/memlane").expanduser()
"""The home `memlane` opens with no option and no variable set."""


def home_options(home: Path, config_file: Path | None) -> tuple[str, ...]:
    """The global options that make another `memlane` (the MCP server a client starts)
    open this `home` with the config file named by `--config` (`config_file`) or
    `MEMLANE_CONFIG`: a client starts it without the shell's `MEMLANE_HOME`, `--home` or
    `--config`, and it would otherwise open the plain default home."""
    options: tuple[str, ...] = ()
    if home.expanduser().absolute() != PLAIN_HOME:
        options += ("--home", str(home.expanduser().absolute()))
    named = config_file or os.environ.get("MEMLANE_CONFIG")
    if named:
        options += ("--config", str(Path(named).expanduser().absolute()))
    return options


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


ADOPTED = "running proxy (serve.json)"
"""The source `memlane config show` gives an upstream taken from the running proxy."""


def with_running_upstreams(loaded: LoadedSettings) -> LoadedSettings:
    """The proxy's upstreams for a command that configures none: `memlane chat` (or
    `sessions ask`) next to a `memlane serve --upstream URL` talks to the same model server."""
    adopt = [
        key
        for key in ("upstream_url", "anthropic_upstream_url")
        if loaded.sources.get(key) == "default"
    ]
    data = read_serve_file(loaded.settings.home_path) if adopt else None
    if data is None:
        return loaded
    update = {key: data[key] for key in adopt if isinstance(data.get(key), str) and data[key]}
    if not update:
        return loaded
    sources = {**loaded.sources, **dict.fromkeys(update, ADOPTED)}
    settings = loaded.settings.model_copy(update=update)
    return replace(loaded, settings=settings, sources=sources)


def listed_model(settings: Settings) -> str | None:
    """The first model the upstream lists (`GET /models`), for a command run with no model
    configured; None when it lists none or cannot be reached."""
    from memlane.proxy.startup import probe_upstream

    models = probe_upstream(settings).models
    return models[0] if models else None
