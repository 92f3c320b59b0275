"""Blocking calls off the event loop, in a pool that depends on who is calling.

The request path and background work (fact extraction, turn storage, summaries,
session indexing, git) both hand blocking store and file calls to threads. With one
shared pool, a burst of background work queues in front of the next request's
store hop. So work started through `Background.spawn` runs its blocking calls in a
pool of its own, and the request path keeps the loop's default pool to itself.
Engine code calls `to_thread` here instead of `asyncio.to_thread`; which pool it
gets is decided by the task it runs in, not by the call site.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from memlane.store.write_gate import mark_background_thread

P = ParamSpec("P")
T = TypeVar("T")

BACKGROUND_THREADS = 2

_in_background: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "memlane_background", default=False
)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def background_context() -> contextvars.Context:
    """The context a background task runs in: its blocking calls go to the background pool."""
    context = contextvars.copy_context()
    context.run(_in_background.set, True)
    return context


def in_background() -> bool:
    return _in_background.get()


def leave_signals_to_the_main_thread() -> None:
    """Block SIGINT and SIGTERM in the calling worker thread.

    The kernel hands a process-wide signal to any thread that does not block it. One
    that lands on a worker sets Python's flag but does not interrupt the main thread's
    blocking read, so `memlane chat` waiting in `input()` would ignore Ctrl-C until
    Enter. Worker threads never handle signals; the main thread always does.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


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
                thread_name_prefix="memlane-bg",
                initializer=_start_background_thread,
            )
        return _pool


async def to_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`asyncio.to_thread`, in the background pool when called from background work."""
    if not _in_background.get():
        return await asyncio.to_thread(fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_background_pool(), call)
