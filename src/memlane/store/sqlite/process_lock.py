"""The write lock between processes that share one SQLite file (`serve --workers`).

SQLite makes a writer that finds the file locked by another process wait in its busy
handler, which sleeps 1, 2, 5, ... up to 100 ms between tries, long after the lock is
free, and a process that commits back to back can keep the other out for most of a
second (`benchmarks/two_writers.py`). Here the writers first queue on a kernel lock on
a sidecar file (`<db>.write-lock`, `flock`): a waiting writer is woken when the other
lets go. It is taken after the process's own `WriteGate`, so one thread per process
waits here, and released after the commit. The kernel drops it when its process dies,
so a killed worker never leaves it taken; a stopped one (SIGSTOP) holds it until it
runs again, and meanwhile a request's own wait stays bounded by
`request_wait_seconds` (it fails open). Where `fcntl` is missing this is a no-op and
SQLite's busy handler is all there is.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]


class ProcessLock:
    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".write-lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is not None:
            fcntl.flock(self._descriptor(), fcntl.LOCK_EX)

    def release(self) -> None:
        if fcntl is not None and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd
