"""`serve.json`: the file that tells other commands a proxy runs on this home.

`memlane serve` writes it once it listens (its pid, address and upstreams) and
removes it when it stops; `memlane status`, `run`, `chat` and every command that
needs an upstream read it (`read_serve_file`). It lives in `files` so that reading
it costs a command no import of the proxy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memlane.config import Settings
from memlane.files.atomic import write_atomic

SERVE_FILE = "serve.json"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- serve.json --------------------------------------------------------------------------


def serve_file(settings: Settings) -> Path:
    return settings.home_path / SERVE_FILE


def write_serve_file(settings: Settings, **extra: Any) -> None:
    """Where this process listens, for `memlane status`; removed when it stops. A
    supervisor of several workers adds them (`workers`, `restarts`)."""
    data = {
        "pid": os.getpid(),
        "url": f"http://{settings.host}:{settings.port}",
        "upstream_url": settings.upstream_url,
        "anthropic_upstream_url": settings.anthropic_upstream_url,
        **extra,
    }
    write_atomic(serve_file(settings), json.dumps(data))


def remove_serve_file(settings: Settings) -> None:
    path = serve_file(settings)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if data.get("pid") == os.getpid():  # another proxy on this home may have taken over
        path.unlink(missing_ok=True)


def read_serve_file(home: Path) -> dict[str, Any] | None:
    """What the live proxy of `home` wrote; None when none runs (or its file is stale)."""
    try:
        data = json.loads((home / SERVE_FILE).read_text(encoding="utf-8"))
        pid = int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if isinstance(data, dict) and pid_alive(pid) else None
