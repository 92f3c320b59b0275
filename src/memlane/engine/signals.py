"""Ctrl-C and SIGTERM belong to the main thread.

The kernel hands a process-wide signal to any thread that does not block it. One that
lands on another thread sets Python's flag but does not interrupt the main thread's
blocking read, so `memlane chat` waiting in `input()` would ignore Ctrl-C until Enter.
This module imports nothing heavy: the CLI uses it before it loads a command.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HANDLED = frozenset({signal.SIGINT, signal.SIGTERM})


def leave_signals_to_the_main_thread() -> None:
    """Block SIGINT and SIGTERM in the calling worker thread (a pool's initializer)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)


@contextlib.contextmanager
def threads_started_here_leave_signals() -> Iterator[None]:
    """Every thread started inside, Python's or a native library's (numpy's BLAS pool
    starts one as it loads), inherits a mask that blocks SIGINT and SIGTERM; the calling
    thread takes them again at the end, and a signal that came meanwhile is delivered then."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
