"""Work that runs after a response: tracked, logged on failure, bounded, drainable by tests.

Background work runs in `threads.background_context()`, so its blocking calls use a
thread pool of their own and never queue in front of a request's, and it starts a job
or a blocking step only when no request is in memlane's hands
(`threads.RequestTraffic`). The number of
tasks in flight is bounded: past `MAX_PENDING`, new background work is dropped
(counted and logged once a minute), never a request.

Work a turn causes is batched per session (`Background.batch`): items wait under a
key until the key has been quiet for a while, or enough of them wait, or the oldest
has waited long enough, and then one job takes them all. A busy session costs one job
per batch, not one per turn; `drain` (tests, shutdown) starts every waiting batch at
once. Waiting items are bounded too (`MAX_BATCHED`): past it, new items are dropped
and counted like refused jobs.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from memlane.config import Settings
from memlane.engine.threads import TRAFFIC, background_context

log = logging.getLogger("memlane.background")

MAX_PENDING = 512
MAX_BATCHED = 20_000
"""Items waiting in batches, all keys together: past this, new items are dropped."""
DROP_LOG_SECONDS = 60.0
START_DELAY_SECONDS = 0.02
"""How long a job waits before it starts. An agent's next request usually follows the
answer that queued the job within milliseconds (a quick tool call); starting a moment
later lets that request be prepared and forwarded first, and the job runs while the
request waits on the upstream."""


BATCH_MAX_WAIT_SECONDS = 60.0
"""The longest the oldest item of a batch waits, however busy its key stays."""

Runner = Callable[[list[Any]], Coroutine[Any, Any, Any]]
"""What a batch's job runs: the waiting items, oldest first."""


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """When a key's waiting items become a job."""

    quiet: float
    """Seconds without a new item."""
    size: int
    """Items that start a job at once (and the most one job takes)."""
    wait: float = BATCH_MAX_WAIT_SECONDS
    """Seconds the oldest item waits at most."""


def session_policy(settings: Settings) -> BatchPolicy:
    """How a session's per-turn work (memory, index, running summary) is batched."""
    return BatchPolicy(quiet=settings.memory_batch_quiet_seconds, size=settings.memory_batch_turns)


@dataclass(eq=False)
class _Batch:
    key: str
    name: str
    run: Runner
    policy: BatchPolicy
    items: list[Any] = field(default_factory=list)
    oldest: float = 0.0
    latest: float = 0.0
    context: contextvars.Context | None = None
    """The context of the latest item's caller: its job runs in a copy (the credential a
    client lent for memlane's own calls, `text.llm.REQUEST_KEY`, in memory only)."""
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[Any] | None = None


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
        self._batches: dict[str, _Batch] = {}
        self._batched = 0
        self._draining = False

    def _drop(self, name: str, count: int = 1) -> None:
        self.dropped += count
        now = time.monotonic()
        if now - self._dropped_logged_at >= DROP_LOG_SECONDS:
            self._dropped_logged_at = now
            log.warning(
                "background queue full (%d in flight, %d waiting): dropped %s (%d dropped so far)",
                len(self._tasks),
                self._batched,
                name,
                self.dropped,
            )

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any] | None:
        """Run `coro` after the response; None (and the work dropped) when the queue is full."""
        if len(self._tasks) >= self.max_pending:
            coro.close()
            self._drop(name)
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

    # --- batches -----------------------------------------------------------------
    def batch(self, key: str, item: Any, run: Runner, policy: BatchPolicy, *, name: str) -> bool:
        """Add `item` to `key`'s batch; `run(items)` takes the batch in one job, when `policy`
        says, never two jobs of one key at once. False (the item dropped) when full."""
        if self._batched >= MAX_BATCHED:
            self._drop(name)
            return False
        found = self._batches.get(key)
        if found is None:
            found = self._batches[key] = _Batch(key, name, run, policy)
        now = time.monotonic()
        if not found.items:
            found.oldest = now
        found.items.append(item)
        found.latest = now
        found.run, found.policy, found.name = run, policy, name
        found.context = contextvars.copy_context()
        self._batched += 1
        self._plan(found)
        return True

    @property
    def batched(self) -> int:
        """Items waiting in batches (not yet taken by a job)."""
        return self._batched

    def flush_batches(self) -> None:
        """Start every waiting batch now (its key's running job, if any, takes it next)."""
        for found in list(self._batches.values()):
            self._plan(found, now=True)

    def _plan(self, found: _Batch, *, now: bool = False) -> None:
        if found.task is not None:
            return  # the running job plans the rest when it ends
        if found.timer is not None:
            found.timer.cancel()
            found.timer = None
        if not found.items:
            self._batches.pop(found.key, None)
            return
        policy = found.policy
        due = min(found.latest + policy.quiet, found.oldest + policy.wait) - time.monotonic()
        if now or self._draining or len(found.items) >= policy.size or due <= 0:
            self._start(found)
        else:
            found.timer = asyncio.get_running_loop().call_later(due, self._start, found)

    def _start(self, found: _Batch) -> None:
        found.timer = None
        if found.task is not None or not found.items:
            return
        size = found.policy.size
        items, found.items = found.items[:size], found.items[size:]
        self._batched -= len(items)
        context = found.context or contextvars.copy_context()
        task = context.run(self.spawn, found.run(items), name=found.name)
        if task is None:  # the queue is full: these items are dropped (spawn counted one)
            self.dropped += len(items) - 1
            self._plan(found)
            return
        found.task = task
        task.add_done_callback(lambda _: self._ended(found))

    def _ended(self, found: _Batch) -> None:
        found.task = None
        self._plan(found)

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
        """Jobs in flight plus items waiting in batches: work not done yet."""
        return len(self._tasks) + self._batched

    async def cancel_all(self) -> int:
        """Cancel what is still running (shutdown, after a bounded drain) and the services,
        and wait for them; the number of unfinished jobs and never-started batch items (not
        services) is returned."""
        waiting = self._batched
        for found in self._batches.values():
            if found.timer is not None:
                found.timer.cancel()
        self._batches.clear()
        self._batched = 0
        jobs = list(self._tasks)
        tasks = [*jobs, *self._services]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(jobs) + waiting

    async def drain(self) -> None:
        """Start every waiting batch, and wait until no background work is left (tasks may
        spawn more tasks, or add to batches: those start at once too).

        Callers bound the wait themselves (`asyncio.timeout`), as shutdown and tests differ.
        """
        self._draining = True
        try:
            while self._tasks or self._batched:
                self.flush_batches()
                if self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)
                else:
                    await asyncio.sleep(0)
        finally:
            self._draining = False
