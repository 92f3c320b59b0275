"""Where this process's CPU time went, by the part of memlane that spent it.

A proxy's CPU is spent by a few threads with distinct jobs: the event loop (every
request's parse, shaping, relay), the store's writer (every turn's rows), the memory
book's writer (entry files and their index rows), the background pool (facts, summaries,
the session index), the request path's worker threads, the WAL checkpointer, and the
helper processes it runs (git). `memlane status` shows the seconds each has spent since
the proxy started, and `benchmarks/load.py` divides their growth over a run by its
requests: a figure per part, without a profiler.

Each part is known by its threads' names (`engine.threads`, `store.group_commit`,
`store.sqlite.checkpoint`). Time is read per live thread, from Linux's `/proc` (other
systems show the process's and the helpers' only): the pools' threads live as long as
the process, and a thread that ended (a start-up probe) takes its time with it, so the
parts can add up to a little less than `process`.
"""

from __future__ import annotations

import os
import threading

from memlane.engine.threads import (
    BACKGROUND_THREADS_NAME,
    BOOK_THREAD_NAME,
    REQUEST_THREADS_NAME,
)
from memlane.store.group_commit import WRITER_THREAD_NAME
from memlane.store.sqlite.checkpoint import THREAD_NAME as CHECKPOINT_THREAD_NAME

EVENT_LOOP = "event loop"
PARTS = (
    (REQUEST_THREADS_NAME, "request threads"),
    (WRITER_THREAD_NAME, "store writer"),
    (BOOK_THREAD_NAME, "memory book"),
    (BACKGROUND_THREADS_NAME, "background"),
    (CHECKPOINT_THREAD_NAME, "checkpoints"),
)
"""Thread-name prefixes and the part each names."""
OTHER = "other threads"
PROCESS = "process"
"""The whole process, every thread's time, ended ones included."""
HELPERS = "helper processes"
"""Processes memlane ran and waited for (git), their own CPU time."""
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""The unit of `/proc`'s CPU times."""


def part_of(thread_name: str) -> str:
    """The part of memlane a thread of this name works for."""
    for prefix, part in PARTS:
        if thread_name.startswith(prefix):
            return part
    return OTHER


def cpu_seconds() -> dict[str, float]:
    """Seconds of CPU (user and system) since the process started: per part, for the
    process and for its helper processes. Called on the event loop: the calling thread is
    the loop's."""
    spent: dict[str, float] = {}
    here = threading.current_thread()
    for thread in threading.enumerate():
        seconds = _thread_seconds(thread)
        if seconds is not None:
            part = EVENT_LOOP if thread is here else part_of(thread.name)
            spent[part] = spent.get(part, 0.0) + seconds
    times = os.times()
    spent[PROCESS] = times.user + times.system
    spent[HELPERS] = times.children_user + times.children_system
    return {part: round(seconds, 3) for part, seconds in spent.items()}


def added(totals: dict[str, float], more: dict[str, float]) -> dict[str, float]:
    """Two processes' `cpu_seconds` as one (a proxy's workers)."""
    out = dict(totals)
    for part, seconds in more.items():
        out[part] = round(out.get(part, 0.0) + float(seconds), 3)
    return out


def _thread_seconds(thread: threading.Thread) -> float | None:
    """The thread's CPU time from Linux's `/proc` (by its native id: a thread that ended
    meanwhile is simply not found); None on other systems."""
    if thread.native_id is None:
        return None
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # the fields after the command's closing parenthesis: utime and stime are 12th and 13th
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS
