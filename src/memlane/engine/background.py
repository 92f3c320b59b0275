"""Work that runs after a response: tracked, logged on failure, drainable by tests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("memlane.background")


class Background:
    """A set of running tasks. Fire-and-forget loses errors; this keeps and logs them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background task %s failed: %r", task.get_name(), exc, exc_info=exc)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until no background work is left (tasks may spawn more tasks).

        Callers bound the wait themselves (`asyncio.timeout`), as shutdown and tests differ.
        """
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
