"""Work that runs after a response: tracked, logged on failure, bounded, drainable by tests.

Background work runs in `threads.background_context()`, so its blocking calls use a
thread pool of their own and never queue in front of a request's, and it starts a job
or a blocking step only when no request is in memlane's hands
(`threads.RequestTraffic`). The number of
tasks in flight is bounded: past `MAX_PENDING`, new background work is dropped
(counted and logged once a minute), never a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

from memlane.engine.threads import TRAFFIC, background_context

log = logging.getLogger("memlane.background")

MAX_PENDING = 512
DROP_LOG_SECONDS = 60.0
START_DELAY_SECONDS = 0.02
"""How long a job waits before it starts. An agent's next request usually follows the
answer that queued the job within milliseconds (a quick tool call); starting a moment
later lets that request be prepared and forwarded first, and the job runs while the
request waits on the upstream."""


async def _after_requests(coro: Coroutine[Any, Any, Any]) -> Any:
    """A job starts a moment after it is queued, once the requests in hand are forwarded
    (`threads.RequestTraffic`)."""
    await asyncio.sleep(START_DELAY_SECONDS)
    await TRAFFIC.yield_to_requests()
    return await coro


class Background:
    """A set of running tasks. Fire-and-forget loses errors; this keeps and logs them."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._services: set[asyncio.Task[Any]] = set()
        self.max_pending = max_pending
        self.dropped = 0
        """Background jobs refused because `max_pending` were already in flight."""
        self._dropped_logged_at = 0.0

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any] | None:
        """Run `coro` after the response; None (and the work dropped) when the queue is full."""
        if len(self._tasks) >= self.max_pending:
            coro.close()
            self.dropped += 1
            now = time.monotonic()
            if now - self._dropped_logged_at >= DROP_LOG_SECONDS:
                self._dropped_logged_at = now
                log.warning(
                    "background queue full (%d in flight): dropped %s (%d dropped so far)",
                    len(self._tasks),
                    name,
                    self.dropped,
                )
            return None
        task = asyncio.get_running_loop().create_task(
            _after_requests(coro), name=name, context=background_context()
        )
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        task.add_done_callback(lambda _: coro.close())  # cancelled before it began: never run
        return task

    def start_service(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coro` for the life of the process (the memory file watcher): tracked and
        logged if it dies like any background work, in the background's thread pool, but
        never waited for by `drain` (it does not end by itself); `cancel_all` stops it."""
        task = asyncio.get_running_loop().create_task(coro, name=name, context=background_context())
        self._services.add(task)
        task.add_done_callback(self._finished)
        return task

    @property
    def services(self) -> list[str]:
        """Names of the long-running services still running."""
        return sorted(task.get_name() for task in self._services if not task.done())

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._services.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background task %s failed: %r", task.get_name(), exc, exc_info=exc)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def cancel_all(self) -> int:
        """Cancel what is still running (shutdown, after a bounded drain) and the services,
        and wait for them; the number of unfinished jobs (not services) is returned."""
        jobs = list(self._tasks)
        tasks = [*jobs, *self._services]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(jobs)

    async def drain(self) -> None:
        """Wait until no background work is left (tasks may spawn more tasks).

        Callers bound the wait themselves (`asyncio.timeout`), as shutdown and tests differ.
        """
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
