"""Watch the memory files and report what a person created, edited or deleted.

Uses watchfiles (inotify on Linux, polling elsewhere or when forced). Changes
are batched (a short debounce), filtered to memory Markdown files (temporary
files of atomic writes are ignored) and handed to a callback; a failing
callback is logged and watching goes on. memlane's own writes show up too:
the callback compares content hashes and ignores files it wrote itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

log = logging.getLogger("memlane.memory.watch")

DEBOUNCE_MS = 200
OnChange = Callable[[set[Path]], Awaitable[object]]


def _memory_file(change: Change, path: str) -> bool:
    name = Path(path).name
    return name.endswith(".md") and not name.startswith(".")


async def watch(
    folder: Path,
    on_change: OnChange,
    *,
    stop: asyncio.Event,
    force_polling: bool | None = None,
    ready: asyncio.Event | None = None,
) -> None:
    """Run until `stop` is set; `ready` is set once the watch is in place."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    watcher = awatch(
        folder,
        watch_filter=_memory_file,
        stop_event=stop,
        debounce=DEBOUNCE_MS,
        step=50,
        force_polling=force_polling,
        yield_on_timeout=True,
        rust_timeout=200,
    )
    async for changes in watcher:
        if ready is not None and not ready.is_set():
            ready.set()
        if not changes:
            continue
        paths = {Path(path) for _, path in changes}
        try:
            await on_change(paths)
        except Exception:  # the watcher must outlive one bad batch
            log.exception("re-indexing changed memory files failed")
