"""A process that stops slowly on SIGTERM: a stand-in for a worker with a long drain.

Its own module, with nothing but the standard library, so that a spawned child starts
in a moment instead of importing memlane and the tests' servers."""

from __future__ import annotations

import signal
import threading
import time
from multiprocessing.connection import Connection


def stops_slowly(seconds: float, told: Connection) -> None:
    """A worker whose graceful stop takes `seconds` once SIGTERM comes (a long drain)."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    told.send("ready")
    while not stopping.is_set():
        time.sleep(0.01)
    time.sleep(seconds)
