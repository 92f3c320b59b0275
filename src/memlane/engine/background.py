"""Work that runs after a response: tracked, logged on failure, bounded, drainable by tests.

Background work runs in `threads.background_context()`, so its blocking calls use a
thread pool of their own and never queue in front of a request's, and it starts a job
or a blocking step only when no request is in memlane's hands
(`threads.RequestTraffic`). The number of
tasks in flight is bounded: past `MAX_PENDING`, a spawned job waits, not yet begun, for
one to end, and a due batch waits for room. A busy queue delays work, never drops it:
what a spawned job does is often found nowhere else (the commit of the memory's queued
changes, the results of memlane's own tool calls kept for the model's next request).
Only past `MAX_WAITING` spawned jobs waiting as well is one dropped (counted and logged
once a minute), never a request.

Work a turn causes is batched per session (`Background.batch`): items wait under a
key until the key has been quiet for a while, or enough of them wait, or the oldest
has waited long enough, and then one job takes them all: what waits when the job
begins, not when it was planned, so the turns that came while it waited for its turn
(`_after_requests`) go with it. A busy session costs one job per batch, not one per
turn; `drain` (tests, shutdown) starts every waiting batch at once.

Items in memory are bounded in count (`MAX_BATCHED`) and in bytes (`MAX_BATCHED_BYTES`,
the sizes their callers give), all keys together: those waiting and those a job took
and has not finished with, as a job holds its items' texts and what it makes of them
until it ends. Past either bound, an item whose work can be found again elsewhere
(an answered turn's memory work, re-derived from the store) is kept as its key only:
the caller's `stand_in`, held once per key however many items it stands for, which
tells the key's next job to re-read them. An item with no stand-in is dropped and
counted like a refused job.

When jobs end, the C heap's free memory is given back to the system now and then
(`engine.heap`): their bursts would otherwise stay in the process's resident memory.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.heap import HeapTrim, glibc_trim
from memlane.engine.threads import TRAFFIC, background_context

log = logging.getLogger("memlane.background")

MAX_PENDING = 512
MAX_WAITING = 512
"""Spawned jobs that wait for room past `MAX_PENDING`, not yet begun: each holds only its
arguments, and the kinds that come often coalesce (one memory commit waits at a time),
so this is a safety bound; past it a spawned job is dropped."""
MAX_BATCHED = 8_192
"""Items in memory, all keys together (waiting in batches, or taken by a job not yet
ended): past this, new items wait as their key's stand-in only (or, with none, are
dropped). A remembered turn's item holds its texts (a few kilobytes,
`memory_message_chars` at most), and its job the entries made of them, so this bounds
what queued work costs: about 3 KB a turn of the soak's (`benchmarks/load.py --soak`).
A count alone does not bound memory: a turn may hold two messages of
`memory_message_chars` (64,000 characters, up to 256 KB as Python strings), so 8,192 of
them could hold a gigabyte; hence `MAX_BATCHED_BYTES` too."""
MAX_BATCHED_BYTES = 32 * 1024 * 1024
"""Bytes the items in memory may hold, all keys together (each item's size as its caller
counts it: a turn's texts). Past this, like past `MAX_BATCHED`, an item waits as its
key's stand-in only. 32 MiB: above the soak's 8,192 turns of about 3 KB (the count bound
is reached first there); 256 turns of two 64,000-character English texts, 64 of the
largest (four bytes a character)."""
DROP_LOG_SECONDS = 60.0
START_DELAY_SECONDS = 0.02
"""How long a job waits before it starts. An agent's next request usually follows the
answer that queued the job within milliseconds (a quick tool call); starting a moment
later lets that request be prepared and forwarded first, and the job runs while the
request waits on the upstream."""


FULL_RETRY_SECONDS = 1.0
"""How long a due batch waits for room when `MAX_PENDING` jobs are in flight: it stays
whole (bounded by `MAX_BATCHED`), never dropped for want of a job."""

BATCH_MAX_WAIT_SECONDS = 60.0
"""The longest the oldest item of a batch waits, however busy its key stays."""

Runner = Callable[[list[Any]], Coroutine[Any, Any, Any]]
"""What a batch's job runs: the waiting items, oldest first."""


BATCH_MOST = 64
"""The most items one job of a session takes: a job that fell behind catches up in one go
(one write, one extraction call per `extract.MAX_BATCH_CHARS`), not `size` at a time."""


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """When a key's waiting items become a job."""

    quiet: float
    """Seconds without a new item."""
    size: int
    """Items that start a job at once."""
    wait: float = BATCH_MAX_WAIT_SECONDS
    """Seconds the oldest item waits at most."""
    most: int = BATCH_MOST
    """The most items one job takes (at least `size`): the rest wait for the next."""


def session_policy(settings: Settings) -> BatchPolicy:
    """How a session's per-turn work (memory, index, running summary) is batched."""
    size = settings.memory_batch_turns
    quiet = settings.memory_batch_quiet_seconds
    return BatchPolicy(quiet=quiet, size=size, most=max(size, BATCH_MOST))


@dataclass(eq=False)
class _StandIn:
    """The caller's stand-in as queued: found by identity, whatever it holds."""

    item: Any


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
    sizes: list[int] = field(default_factory=list)
    """The bytes each of `items` holds (a stand-in: 0), in the same order."""
    stand_in: _StandIn | None = None
    """What stands for the items left out past the bound (`Background.batch`), if any."""
    spilled: int = 0
    """How many items it stands for."""


async def _after_requests(coro: Coroutine[Any, Any, Any]) -> Any:
    """A job starts a moment after it is queued, once the requests in hand are forwarded
    (`threads.RequestTraffic`)."""
    await asyncio.sleep(START_DELAY_SECONDS)
    await TRAFFIC.yield_to_requests()
    return await coro


class Background:
    """A set of running tasks. Fire-and-forget loses errors; this keeps and logs them."""

    def __init__(
        self,
        max_pending: int = MAX_PENDING,
        max_batched: int = MAX_BATCHED,
        *,
        max_waiting: int = MAX_WAITING,
        max_batched_bytes: int = MAX_BATCHED_BYTES,
        heap: HeapTrim | None = None,
    ) -> None:
        self.heap = heap if heap is not None else HeapTrim(glibc_trim())
        """Gives the heap's free memory back as jobs end (`engine.heap`)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._services: set[asyncio.Task[Any]] = set()
        self.max_pending = max_pending
        self.max_waiting = max_waiting
        self._waiting: deque[tuple[Coroutine[Any, Any, Any], str, contextvars.Context]] = deque()
        """Spawned jobs waiting for room, oldest first, each with its caller's context."""
        self.dropped = 0
        """Background jobs refused: past `max_waiting` spawns waiting, or batch items with
        no stand-in past the batches' bounds."""
        self._dropped_logged_at = 0.0
        self._batches: dict[str, _Batch] = {}
        self.max_batched = max_batched
        self._batched = 0
        self._held = 0
        """Items taken by jobs that have not ended (counted against `max_batched` too)."""
        self.max_batched_bytes = max_batched_bytes
        self._bytes = 0
        """Bytes of the items waiting in batches or held by jobs not ended."""
        self._spilled = 0
        self._draining = False
        self._timers: set[asyncio.TimerHandle] = set()
        """Calls planned for later (`later`), cancelled by `cancel_all`."""

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

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> bool:
        """Run `coro` after the response; past `max_pending` jobs in flight it waits for
        one to end. False (and the work dropped) only past `max_waiting` waiting too."""
        if len(self._tasks) >= self.max_pending and len(self._waiting) >= self.max_waiting:
            coro.close()
            self._drop(name)
            return False
        self._waiting.append((coro, name, background_context()))
        self._begin_waiting()
        return True

    def _begin(
        self, coro: Coroutine[Any, Any, Any], name: str, context: contextvars.Context
    ) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(
            _after_requests(coro), name=name, context=context
        )
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        task.add_done_callback(lambda _: coro.close())  # cancelled before it began: never run
        return task

    def _begin_waiting(self) -> None:
        """Begin the spawned jobs that waited, oldest first, while there is room."""
        while self._waiting and len(self._tasks) < self.max_pending:
            self._begin(*self._waiting.popleft())

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        """Call `callback` on the loop in `delay` seconds, unless `cancel_all` comes first: a
        timer, so nothing holds a job's place while it waits (a retry after a failure)."""

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)

    def start_service(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coro` for the life of the process (the memory file watcher): tracked and
        logged if it dies like any background work, in the background's thread pool, but
        never waited for by `drain` (it does not end by itself); `cancel_all` stops it."""
        task = asyncio.get_running_loop().create_task(coro, name=name, context=background_context())
        self._services.add(task)
        task.add_done_callback(self._finished)
        return task

    # --- batches -----------------------------------------------------------------
    def batch(
        self,
        key: str,
        item: Any,
        run: Runner,
        policy: BatchPolicy,
        *,
        name: str,
        stand_in: Any = None,
        size: int = 0,
    ) -> bool:
        """Add `item` (holding `size` bytes) to `key`'s batch; `run(items)` takes the batch
        in one job, when `policy` says, never two jobs of one key at once. Past
        `max_batched` items or `max_batched_bytes`, `stand_in` (when given) is queued in its
        place, once per key, and the job that takes it re-reads the items it stands for;
        without one, the item is dropped and False returned."""
        full = (
            self._batched + self._held >= self.max_batched
            or self._bytes + size > self.max_batched_bytes
        )
        if full and stand_in is None:
            self._drop(name)
            return False
        found = self._batches.get(key)
        if found is None:
            found = self._batches[key] = _Batch(key, name, run, policy)
        now = time.monotonic()
        if not found.items:
            found.oldest = now
        if not full:
            found.items.append(item)
            found.sizes.append(size)
            self._batched += 1
            self._bytes += size
        else:  # over the bound: the key only, not the payload
            self._spilled += 1
            found.spilled += 1
            if found.stand_in is None:
                found.stand_in = _StandIn(stand_in)
                found.items.append(found.stand_in)
                found.sizes.append(0)
        found.latest = now
        found.run, found.policy, found.name = run, policy, name
        found.context = contextvars.copy_context()
        self._plan(found)
        return True

    @property
    def batched(self) -> int:
        """Items waiting in batches (not yet taken by a job), stand-ins not counted."""
        return self._batched

    @property
    def batched_bytes(self) -> int:
        """Bytes of the items in memory: waiting in batches, or held by jobs not ended."""
        return self._bytes

    @property
    def spilled(self) -> int:
        """Items past the bound, waiting as their key's stand-in only."""
        return self._spilled

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
        if len(self._tasks) >= self.max_pending:  # no room for a job: the batch waits on
            loop = asyncio.get_running_loop()
            found.timer = loop.call_later(FULL_RETRY_SECONDS, self._start, found)
            return
        context = found.context or contextvars.copy_context()
        found.task = task = self._begin(
            self._run(found), found.name, context.run(background_context)
        )
        task.add_done_callback(lambda _: self._ended(found))

    async def _run(self, found: _Batch) -> None:
        """The job: it takes its items when it begins, so those that came while it waited
        for its turn go with it."""
        items, size = self._take(found, max(found.policy.most, found.policy.size))
        if not items:
            return
        self._held += len(items)
        try:
            await found.run(items)
        finally:
            self._held -= len(items)
            self._bytes -= size

    def _take(self, found: _Batch, most: int) -> tuple[list[Any], int]:
        """The first `most` items of the batch, and the bytes they hold (held by the job
        that takes them until it ends)."""
        items, found.items = found.items[:most], found.items[most:]
        size = sum(found.sizes[:most])
        del found.sizes[:most]
        if found.stand_in is not None and found.stand_in in items:
            self._batched += 1  # the stand-in was never counted as an item
            self._spilled -= found.spilled
            found.stand_in, found.spilled = None, 0
        self._batched -= len(items)
        return [each.item if isinstance(each, _StandIn) else each for each in items], size

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
        self._begin_waiting()
        if self.heap.due():
            threads.in_a_background_thread(self.heap.run)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background task %s failed: %r", task.get_name(), exc, exc_info=exc)

    @property
    def pending(self) -> int:
        """Jobs in flight or waiting for room, plus items waiting in batches or as a
        stand-in: work not done yet."""
        return len(self._tasks) + len(self._waiting) + self._batched + self._spilled

    async def cancel_all(self) -> int:
        """Cancel what is still running (shutdown, after a bounded drain) and the services,
        and wait for them; the number of unfinished jobs and never-started batch items (not
        services) is returned."""
        waiting = self._batched + self._spilled + len(self._waiting)
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        while self._waiting:
            self._waiting.popleft()[0].close()
        for found in self._batches.values():
            if found.timer is not None:
                found.timer.cancel()
            found.items, found.stand_in, found.spilled = [], None, 0  # a job ending plans none
            self._bytes -= sum(found.sizes)
            found.sizes = []
        self._batches.clear()
        self._batched = self._spilled = 0
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
        A bound that expires leaves the jobs running (`asyncio.wait`, not `gather`, which
        would cancel them on the way out): `cancel_all` then stops and counts them.
        """
        self._draining = True
        try:
            while self._tasks or self._waiting or self._batched or self._spilled:
                self._begin_waiting()
                self.flush_batches()
                if self._tasks:
                    await asyncio.wait(list(self._tasks))
                else:  # batches due, and (with no room for a job) waiting for it
                    await asyncio.sleep(0 if self.max_pending else FULL_RETRY_SECONDS)
        finally:
            self._draining = False
