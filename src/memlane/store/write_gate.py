"""One writer at a time in this process, and a request's write goes first.

SQLite has one writer at a time; the store queues a process's writers on a lock
(`SQLiteStore._write`). With a plain lock, a request storing its user turn
waits behind whatever background writes (turn entries, their neighbours'
documents, session metadata) queued before it, so background work shows up as
request latency. This gate keeps the one-writer rule but lets a waiting
request-path writer go before any waiting background writer: a background
writer takes the gate only while no request-path writer waits. The request
still waits for a background transaction already running, never for a queue
of them.

Which threads are background ones is told by the thread itself: the engine's
background pool marks its threads with `mark_background_thread` (its
initializer).
"""

from __future__ import annotations

import threading
import time

_local = threading.local()


def mark_background_thread() -> None:
    """Mark the calling thread as a background one (a thread pool's initializer)."""
    _local.background = True


def is_background_thread() -> bool:
    return bool(getattr(_local, "background", False))


class WriteGate:
    """A non-reentrant lock where waiting request-path threads go before background ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._held = False
        self._waiting = 0  # request-path threads waiting for the gate
        self._waiting_background = 0

    def acquire(self, timeout: float) -> bool:
        """Take the gate within `timeout` seconds; False when it stayed taken."""
        background = is_background_thread()
        deadline = time.monotonic() + timeout
        with self._cond:
            if background:
                self._waiting_background += 1
            else:
                self._waiting += 1
            try:
                while self._held or (background and self._waiting):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                self._held = True
                return True
            finally:
                if background:
                    self._waiting_background -= 1
                else:
                    self._waiting -= 1

    @property
    def waiting(self) -> tuple[int, int]:
        """(request-path, background) threads waiting for the gate now."""
        with self._cond:
            return self._waiting, self._waiting_background

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()
