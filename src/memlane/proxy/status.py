"""`GET /v1/memlane/status`, and the file that tells the CLI a proxy runs on this home.

`memlane status` reads `serve.json` from the home to find the proxy, then asks
this route what it has been doing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.files.atomic import write_atomic
from memlane.proxy.state import require_operator, runtime

SERVE_FILE = "serve.json"

router = APIRouter(prefix="/v1/memlane", tags=["memlane"], dependencies=[Depends(require_operator)])

Rt = Annotated[Runtime, Depends(runtime)]


@router.get("/status", summary="What this proxy has done lately, and its store's counts")
async def status(rt: Rt) -> dict[str, Any]:
    counts = await asyncio.to_thread(_counts, rt)
    return {
        "object": "memlane.status",
        "upstream_url": rt.settings.upstream_url,
        **rt.activity.snapshot(),
        "background_pending": rt.background.pending,
        **counts,
    }


def _counts(rt: Runtime) -> dict[str, int]:
    return {"sessions": rt.store.count("sessions"), "memories": rt.store.count("facts")}


def serve_file(settings: Settings) -> Path:
    return settings.home_path / SERVE_FILE


def write_serve_file(settings: Settings) -> None:
    """Where this process listens, for `memlane status`; removed when it stops."""
    data = {
        "pid": os.getpid(),
        "url": f"http://{settings.host}:{settings.port}",
        "upstream_url": settings.upstream_url,
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
