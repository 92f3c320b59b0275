"""`GET /v1/memlane/status`, and the file that tells the CLI a proxy runs on this home.

`memlane status` reads `serve.json` from the home to find the proxy, then asks
this route what it has been doing. With several workers, whichever answers adds
up what every live worker published (`workers/<index>.json`, rewritten every
`PUBLISH_SECONDS`): requests and errors of the last hour, background work
pending, the last extraction, the stages that failed and the CPU time each part of
memlane spent (`proxy.cpu`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.runtime import Runtime
from memlane.files.atomic import write_atomic
from memlane.files.serve_file import SERVE_FILE as SERVE_FILE
from memlane.files.serve_file import pid_alive as pid_alive
from memlane.files.serve_file import remove_serve_file as remove_serve_file
from memlane.files.serve_file import serve_file as serve_file
from memlane.files.serve_file import write_serve_file as write_serve_file
from memlane.proxy import cpu
from memlane.proxy.state import WorkerInfo, current_state, require_operator, runtime

WORKERS_FOLDER = "workers"
PUBLISH_SECONDS = 2.0
STALE_SECONDS = 30.0
"""A worker's published activity older than this (or of a process gone) is not counted."""

router = APIRouter(prefix="/v1/memlane", tags=["memlane"], dependencies=[Depends(require_operator)])

Rt = Annotated[Runtime, Depends(runtime)]


@router.get("/status", summary="What this proxy has done lately, and its store's counts")
async def status(rt: Rt, request: Request) -> dict[str, Any]:
    counts = await asyncio.to_thread(_counts, rt)
    activity = activity_of(rt)
    worker = current_state(request).worker
    if worker is not None:
        others = await asyncio.to_thread(published, rt.settings, exclude=worker.index)
        activity = merged(worker, [activity, *others])
    return {
        "object": "memlane.status",
        "upstream_url": rt.settings.upstream_url,
        **activity,
        **counts,
    }


def _counts(rt: Runtime) -> dict[str, int]:
    return {"sessions": rt.store.count("sessions"), "memories": rt.store.count("facts")}


def activity_of(rt: Runtime) -> dict[str, Any]:
    """This process's recent activity, as the status route shows it (called on the
    event loop)."""
    background = rt.background
    return {
        **rt.activity.snapshot(),
        "background_pending": background.pending,
        "background_dropped": background.dropped,
        "cpu_seconds": cpu.cpu_seconds(),
    }


# --- several workers -------------------------------------------------------------------


def worker_file(settings: Settings, index: int) -> Path:
    return settings.home_path / WORKERS_FOLDER / f"{index}.json"


async def publish_activity(rt: Runtime, worker: WorkerInfo) -> None:
    """Rewrite this worker's activity file every `PUBLISH_SECONDS`; remove it at the end."""
    path = worker_file(rt.settings, worker.index)
    try:
        while True:
            data = {"pid": os.getpid(), "at": time.time(), **activity_of(rt)}
            await threads.to_thread(write_atomic, path, json.dumps(data))
            await asyncio.sleep(PUBLISH_SECONDS)
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def published(settings: Settings, *, exclude: int) -> list[dict[str, Any]]:
    """The activity the other live workers published lately."""
    folder = settings.home_path / WORKERS_FOLDER
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.stem == str(exclude):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            fresh = time.time() - float(data["at"]) < STALE_SECONDS
            alive = pid_alive(int(data["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if fresh and alive:
            found.append(data)
    return found


COUNTS = ("requests_last_hour", "errors_last_hour", "background_pending", "background_dropped")
"""What several workers' activity adds up."""


def merged(worker: WorkerInfo, activities: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several workers' activity as one proxy's: counts added up, the latest of the rest."""
    total: dict[str, Any] = {
        "started_at": worker.serving_since.isoformat(),
        "uptime_seconds": int(time.time() - worker.serving_since.timestamp()),
        "requests_last_hour": 0,
        "errors_last_hour": 0,
        "last_extraction": None,
        "failures": {},
        "background_pending": 0,
        "background_dropped": 0,
        "workers": worker.count,
        "workers_reporting": 0,
        "cpu_seconds": {},
    }
    for one in activities:
        total["workers_reporting"] += 1
        for key in COUNTS:
            total[key] += int(one.get(key) or 0)
        total["cpu_seconds"] = cpu.added(total["cpu_seconds"], one.get("cpu_seconds") or {})
        last = one.get("last_extraction")
        if last and (not total["last_extraction"] or last["at"] > total["last_extraction"]["at"]):
            total["last_extraction"] = last
        for stage, entry in (one.get("failures") or {}).items():
            into = total["failures"].setdefault(stage, {"count": 0, "at": ""})
            into["count"] += int(entry.get("count", 0))
            if str(entry.get("at", "")) > into["at"]:
                into["at"], into["last"] = entry.get("at", ""), entry.get("last")
    return total
