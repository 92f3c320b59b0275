"""Every request's writes, committed by one thread in batches: group commit.

One transaction per request meant, per request, taking the write lock (SQLite's, or a
PostgreSQL connection's), a commit (a WAL append), and the in-process search indexes
catching up with what it wrote (`SQLiteSearch._catch_up`), each from whichever worker
thread the request had. Under 200 streaming clients those per-request transactions
were most of the proxy's CPU.

Here one thread per store owns the writing: writes are queued from any thread, and
everything that arrived while the previous batch committed goes into the next one
transaction. Each write runs in a savepoint of its own, so a write that fails undoes
only itself; a commit that fails fails every write of its batch. Each write's outcome
is handed to its `done` callback, in the writer thread, after the commit: a caller that
must know its write is durable waits for that, and nobody else waits at all.

Writes run in the order they were queued, so two writes of one session queued one after
the other are committed in that order, in one batch or in two.

A batch whose first write was queued with `linger` starts `LINGER_SECONDS` later, unless
a caller waits for it first (`hurry`): a request queues its messages while it is still
being prepared, and starting their transaction at once made it share the GIL with the
rest of the request's work (governance 0.35 -> 1.03 ms p50, `next_turn_ab.py`); the
writes that arrive meanwhile join the batch. A hurry is queued like a write, so it
hurries the writes queued before it: one made while nothing lingered (an earlier
request's, its writes done) does not cut short the linger of a write queued after it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memlane.store.base import Store

log = logging.getLogger("memlane.store")

MAX_BATCH = 256
"""Writes committed together at most: a commit is not put off indefinitely under a
stream of writes, and one batch's failure is bounded."""

WRITER_THREAD_NAME = "memlane-writer"
"""The writer thread's name (`memlane status` reports its CPU time under it)."""

LINGER_SECONDS = 0.002
"""How long a batch waits for more writes before it starts, unless hurried."""

Done = Callable[[Any, BaseException | None], None]
"""Called with a write's result, or the error that undid it, once its batch is over."""


@dataclass(frozen=True, slots=True)
class _Write:
    write: Callable[[], Any]
    done: Done
    linger: bool


_STOP = object()
_HURRY = object()


class GroupCommit:
    """One writer thread for one store, committing queued writes in batches."""

    def __init__(
        self,
        store: Store,
        *,
        name: str = WRITER_THREAD_NAME,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._name = name
        self._initializer = initializer
        self._queue: queue.SimpleQueue[_Write | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._hurried = threading.Event()
        """Wakes a lingering batch; what woke it is read from the queue (`_HURRY`)."""
        self._closed = False
        self.batches = 0
        """Batches committed so far (what a test or benchmark reads to see the grouping)."""

    def submit(self, write: Callable[[], Any], done: Done, *, linger: bool = False) -> None:
        """Queue `write` for the next batch; `done` gets its outcome after the commit.
        `linger`: nobody needs it soon, so the batch may wait a moment for more."""
        if self._thread is None:
            self._start()
        if self._closed:
            done(None, RuntimeError("the store's writer has stopped"))
            return
        self._queue.put(_Write(write, done, linger))

    def hurry(self) -> None:
        """Start the writes queued so far now: someone waits for them."""
        self._queue.put(_HURRY)  # before the flag: a batch it wakes finds it queued
        self._hurried.set()

    def close(self, timeout: float | None = None) -> bool:
        """Commit what is queued, then stop; False when the writer did not finish in time."""
        with self._lock:
            if self._closed:
                return True
            self._closed = True
            thread = self._thread
        if thread is None:
            return True
        self._queue.put(_STOP)
        self._hurried.set()
        thread.join(timeout)
        return not thread.is_alive()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            # a daemon: a batch still running at exit is turns in flight, and it is one
            # transaction, rolled back whole
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        if self._initializer is not None:
            self._initializer()
        stopping = False
        while not stopping:
            batch, stopping = self._next_batch()
            if batch:
                self._commit(batch)

    def _next_batch(self) -> tuple[list[_Write], bool]:
        """The writes waiting now (at least one, or the stop), and whether to stop after.
        A batch whose first write lingers also takes those that come until a hurry queued
        after that write, or `LINGER_SECONDS`; it sleeps meanwhile, woken by a hurry
        only, not by each write that joins it."""
        first = self._queue.get()
        while first is _HURRY:  # made before any write now queued: nothing to hurry
            first = self._queue.get()
        if first is _STOP:
            return [], True
        assert isinstance(first, _Write)
        batch = [first]
        until = time.monotonic() + LINGER_SECONDS if first.linger else 0.0
        while True:
            self._hurried.clear()  # before the queue is read: a later hurry wakes the wait
            hurried, stopping = self._take_queued(batch)
            left = until - time.monotonic()
            if hurried or stopping or left <= 0 or len(batch) >= MAX_BATCH:
                return batch, stopping
            self._hurried.wait(left)

    def _take_queued(self, batch: list[_Write]) -> tuple[bool, bool]:
        """Move the writes queued now into `batch` (up to `MAX_BATCH`); whether a hurry,
        and whether the stop, were among what it read."""
        hurried = False
        while len(batch) < MAX_BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return hurried, True
            if item is _HURRY:
                hurried = True
            else:
                assert isinstance(item, _Write)
                batch.append(item)
        return hurried, False

    def _commit(self, batch: list[_Write]) -> None:
        outcomes: list[tuple[Any, BaseException | None]] = []
        try:
            with self._store.batch():
                for item in batch:
                    outcomes.append(self._one(item))
        except BaseException as exc:  # the commit failed: nothing of the batch is stored
            log.warning("a batch of %d writes was not committed: %r", len(batch), exc)
            outcomes = [(None, exc)] * len(batch)
        self.batches += 1
        for item, (value, error) in zip(batch, outcomes, strict=True):
            try:
                item.done(value, error)
            except Exception:
                log.exception("a write's done callback failed")

    def _one(self, item: _Write) -> tuple[Any, BaseException | None]:
        """One write in a savepoint of its own: a failure undoes it alone."""
        try:
            with self._store.transaction():
                return item.write(), None
        except Exception as exc:
            return None, exc
