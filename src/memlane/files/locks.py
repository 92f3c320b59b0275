"""Locks shared by every memlane process on one home: one holder at a time, across processes.

Several processes may write one home at once: the workers of `memlane serve
--workers N`, and the CLI (`memlane memory add`, `memory reindex`) beside a
running proxy. What must not interleave (a memory write with the start-up
catch-up, two git commits of the memory repository, two reconciliations of one
fact scope) takes a `HomeLock`: an advisory `flock` on a file under
`<home>/locks/`. The kernel drops the lock when its holder exits, however it
exits, so a SIGKILLed worker never leaves the home locked.

Each acquisition opens the file anew, so two holders in one process exclude each
other as two processes do. Waiting from async code never ties up a thread:
`hold()` polls a non-blocking attempt from the event loop, so a lock held through
a long catch-up does not starve the background pool; callers on one event loop
first queue on an `asyncio.Lock` of their own, so only one of them polls. Where `fcntl` is missing
(Windows) a lock only orders the callers of one process, and `serve --workers`
is refused there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

LOCKS_FOLDER = "locks"
POLL_FIRST = 0.002
POLL_MAX = 0.05
"""Waiting for a lock polls from `POLL_FIRST` seconds, doubling up to `POLL_MAX`."""
STRIPES = 64
"""Lock files a family of per-key locks (sessions, scopes) is spread over."""

MEMORY_LOCK = "memory"
"""Held by whoever writes the memory files, their snapshot and their index."""
GIT_LOCK = "memory-git"
"""Held by whoever runs git in the memory repository."""

SCOPE_LOCKS = "scope"
"""The family of striped locks held across one fact scope's reconciliation."""
INDEX_LOCKS = "session-index"
"""The family of striped locks held while a session's metadata is indexed."""
SUMMARY_LOCKS = "session-summary"
"""The family of striped locks held while a session's running summary is folded."""

CROSS_PROCESS = fcntl is not None
"""Whether locks order processes (POSIX), not only the callers of one process."""


_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop, per lock file: where that loop's callers of `hold()` queue."""


def _queue(path: Path) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    queues = _QUEUES.get(loop)
    if queues is None:
        queues = _QUEUES[loop] = {}
    return queues.setdefault(path, asyncio.Lock())


def locks_dir(home: Path) -> Path:
    return home / LOCKS_FOLDER


class HomeLock:
    """An exclusive lock on `<home>/locks/<name>.lock`, held by one caller at a time."""

    def __init__(self, home: Path, name: str) -> None:
        self.path = locks_dir(home) / f"{name}.lock"
        self._local = threading.Lock()  # without fcntl: at least one holder per process

    @classmethod
    def striped(cls, home: Path, family: str, key: str, *, stripes: int = STRIPES) -> HomeLock:
        """One of `stripes` locks of a family, chosen by `key`: a bounded number of files
        for an unbounded number of keys (two keys may share one, which only serialises)."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        return cls(home, f"{family}-{int.from_bytes(digest[:4], 'big') % stripes:02d}")

    def _try(self) -> int | None:
        """The open descriptor holding the lock, or None when another holder has it."""
        if fcntl is None:  # pragma: no cover (Windows)
            return 0 if self._local.acquire(blocking=False) else None
        descriptor = self._open()
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def _open(self) -> int:
        """The lock file, open; its folder made when it is missing (not asked for before
        every take: the memory book takes its lock for every write)."""
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

    def _release(self, descriptor: int) -> None:
        if fcntl is None:  # pragma: no cover (Windows)
            self._local.release()
            return
        os.close(descriptor)  # closing the only descriptor drops the flock

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Wait (polling from the event loop, one caller of this loop at a time) until this
        caller holds the lock."""
        async with _queue(self.path):
            delay = POLL_FIRST
            while (descriptor := self._try()) is None:
                await asyncio.sleep(delay)
                delay = min(delay * 2, POLL_MAX)
            try:
                yield
            finally:
                self._release(descriptor)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Wait (blocking this thread) until this caller holds the lock: for sync code."""
        delay = POLL_FIRST
        while (descriptor := self._try()) is None:
            time.sleep(delay)
            delay = min(delay * 2, POLL_MAX)
        try:
            yield
        finally:
            self._release(descriptor)
