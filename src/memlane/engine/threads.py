"""Blocking calls off the event loop, in a pool that depends on who is calling.

The request path and background work (fact extraction, turn storage, summaries,
session indexing, git) both hand blocking store and file calls to threads. With one
shared pool, a burst of background work queues in front of the next request's
store hop. So work started through `Background.spawn` runs its blocking calls in a
pool of its own, and the request path has threads of its own (`RequestThreads`).
Engine code calls `to_thread` here instead of `asyncio.to_thread`; which pool it
gets is decided by the task it runs in, not by the call site.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from memlane.engine.signals import leave_signals_to_the_main_thread
from memlane.store.write_gate import mark_background_thread

P = ParamSpec("P")
T = TypeVar("T")

BACKGROUND_THREADS = 2
REQUEST_THREADS_NAME = "memlane-request"
BACKGROUND_THREADS_NAME = "memlane-bg"
BOOK_THREAD_NAME = "memlane-book"
"""The names of the threads this module starts (each pool's numbers its own), by which
`memlane status` tells what each part of memlane spent (`proxy.cpu`)."""
YIELD_LIMIT_SECONDS = 0.25
"""The longest a background step waits for requests to leave memlane's hands: under a
steady stream of requests, background work still moves on (and back-pressure in
`engine.background` drops what cannot keep up)."""

_in_background: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "memlane_background", default=False
)
_pool: ThreadPoolExecutor | None = None
_writer: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

REQUEST_THREADS = min(32, (os.cpu_count() or 1) + 4)  # what asyncio's default pool would have


class RequestThreads:
    """The request path's worker threads: a fixed set fed from one queue written in C.

    `ThreadPoolExecutor.submit` takes its idle semaphore's lock, a Python-level
    `Condition`, on every call, and builds a `concurrent.futures.Future` (another
    `Condition`) for each. Its workers take that lock too after every job; when one is
    switched out for the GIL while holding it, the event loop waits for the lock, and so
    every request in the process waits. Under 200 streaming clients that was a tenth of
    the loop's time (py-spy). Here a submission is one `SimpleQueue.put` and the result
    goes straight to the caller's asyncio future.
    """

    def __init__(self, threads: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads = threads
        self._name = name
        self._started = False
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on one of the threads; it must not raise (see `run_on`)."""
        if not self._started:
            self._start()
        self._jobs.put(job)

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            for number in range(self._threads):
                # daemons: a job still running at exit is a turn in flight, and a store
                # write is one transaction, so it is rolled back whole
                worker = threading.Thread(
                    target=self._work, name=f"{self._name}_{number}", daemon=True
                )
                worker.start()
            self._started = True

    def _work(self) -> None:
        leave_signals_to_the_main_thread()
        while True:
            self._jobs.get()()


_request_threads = RequestThreads(REQUEST_THREADS, REQUEST_THREADS_NAME)


def run_on(threads: RequestThreads, fn: Callable[[], T]) -> asyncio.Future[T]:
    """`fn()` on one of `threads`, in a copy of the caller's context; its result (or
    exception) arrives in the returned future. A cancelled future leaves the call to
    finish on its own, as `asyncio.to_thread` does."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def job() -> None:
        try:
            value = context.run(fn)
        except BaseException as exc:
            post(loop, future, None, exc)
        else:
            post(loop, future, value, None)

    threads.submit(job)
    return future


def background_context() -> contextvars.Context:
    """The context a background task runs in: its blocking calls go to the background pool."""
    context = contextvars.copy_context()
    context.run(_in_background.set, True)
    return context


def in_background() -> bool:
    return _in_background.get()


def worker_pool(threads: int | None, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads leave signals to the main thread."""
    return ThreadPoolExecutor(
        threads, thread_name_prefix=name, initializer=leave_signals_to_the_main_thread
    )


def _start_background_thread() -> None:
    leave_signals_to_the_main_thread()
    mark_background_thread()  # the store lets requests write first


def _background_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                BACKGROUND_THREADS,
                thread_name_prefix=BACKGROUND_THREADS_NAME,
                initializer=_start_background_thread,
            )
        return _pool


def _writer_pool() -> ThreadPoolExecutor:
    global _writer
    with _pool_lock:
        if _writer is None:
            _writer = ThreadPoolExecutor(
                1, thread_name_prefix=BOOK_THREAD_NAME, initializer=_start_background_thread
            )
        return _writer


class RequestTraffic:
    """Whether a request is in this process's hands now, so background work waits its turn.

    A request is "in hand" from its arrival until it is forwarded, and again while its
    answer is relayed: time the client waits on memlane itself. While it waits on the
    upstream (most of a real model call) it is not. Background work (`Background.spawn`,
    and every blocking hop it takes through `to_thread`) starts a step only when no
    request is in hand, or after `YIELD_LIMIT_SECONDS`. A step already running is not
    interrupted; the GIL switch interval (`proxy.server`) bounds what it costs a request.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_hand = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def busy(self) -> bool:
        return self._in_hand > 0

    @property
    def alone(self) -> bool:
        """At most one request in hand (the caller's own): nothing else waits on the loop."""
        return self._in_hand <= 1

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around memlane's own work for a request."""
        self._add(1)
        try:
            yield
        finally:
            self._add(-1)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Inside `serving`: around the wait for the upstream, which leaves the process free."""
        self._add(-1)
        try:
            yield
        finally:
            self._add(1)

    def _add(self, n: int) -> None:
        with self._lock:
            self._in_hand += n
            if self._in_hand > 0 or not self._waiters:
                return
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed meanwhile
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    async def yield_to_requests(self, limit: float = YIELD_LIMIT_SECONDS) -> None:
        """Return when no request is in hand, or after `limit` seconds."""
        if not self._in_hand:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), limit)
        except TimeoutError:
            pass
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


TRAFFIC = RequestTraffic()
"""This process's requests in hand: one per process, like the background pool."""


async def to_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`asyncio.to_thread`, in the background pool when called from background work
    (after letting the requests in hand go first)."""
    await let_requests_go_first()
    return await _run_in(_background_pool, fn, *args, **kwargs)


async def let_requests_go_first() -> None:
    """From background work, wait for the requests in hand (`RequestTraffic`); at once
    from a request."""
    if _in_background.get():
        await TRAFFIC.yield_to_requests()


async def to_thread_at_once(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`to_thread` for the memory book's writer: from background work, on a thread of its
    own, without waiting for the requests in hand; its caller let them go first before
    it took the book's lock (`let_requests_go_first`). Every session's batch waits for
    that lock: waiting under it for the requests (up to `YIELD_LIMIT_SECONDS` a step
    under a steady stream of them), or behind the background pool's queue of other
    jobs' steps, held it idle while the writer fell behind the turns."""
    return await _run_in(_writer_pool, fn, *args, **kwargs)


async def _run_in(
    pool: Callable[[], ThreadPoolExecutor], fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """`fn` on the request path's threads, or from background work on `pool()`'s."""
    if not _in_background.get():
        return await run_on(_request_threads, functools.partial(fn, *args, **kwargs))
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(pool(), call)


def in_a_request_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """`fn()` on one of the request path's threads, started now; its outcome arrives in
    the returned future (which need not be awaited: its error is still retrieved)."""
    future = run_on(_request_threads, fn)
    future.add_done_callback(retrieved)
    return future


def in_a_background_thread(fn: Callable[[], None]) -> None:
    """`fn()` on a background thread when one is free; nothing waits for it, so `fn`
    handles its own errors. Dropped once the pool has shut down (the process is ending)."""
    with contextlib.suppress(RuntimeError):
        _background_pool().submit(fn)


def post(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    value: Any,
    error: BaseException | None,
) -> None:
    """Settle `future` on its loop, from a worker thread."""
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(_settle, future, value, error)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # its awaiter was cancelled
        return
    if isinstance(error, asyncio.CancelledError):
        future.cancel()
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def retrieved(future: asyncio.Future[Any]) -> None:
    """A done callback: a future nobody awaits still has its error retrieved (asyncio
    would log it as never retrieved)."""
    if not future.cancelled():
        future.exception()
