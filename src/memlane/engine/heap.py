"""Give the C heap's free memory back to the system after background work.

Background work (a batch's memory files, the keyword index's merges, SQLite's pages)
allocates and frees megabytes at a time in several threads. glibc's malloc keeps what a
thread frees in that thread's arena (up to eight per core) for its next allocation and
hands back to the system only what is free at the top of the main one, so a busy
proxy's resident memory grows by what its bursts left free, not only by what it holds:
under the 200-client soak (`benchmarks/load.py --soak`) the arenas' free memory went
from 12 to 74 MB in two and a half minutes, while what they held in use grew by 24 MB.
`malloc_trim(0)` returns the free pages of every arena: there, 6 to 36 MB each time,
in 2 to 30 ms, off the event loop. `HeapTrim` runs it at most once every
`TRIM_EVERY_SECONDS` while background jobs end. Where there is no glibc (macOS, musl)
it does nothing.

Trimming does not undo fragmentation, and glibc's own thresholds made it worse: a
block of `MMAP_THRESHOLD` or more is mapped on its own and unmapped when freed, but
each time such a block is freed glibc raises the threshold to its size (up to 32 MB),
so after the first keyword-index merge or memory snapshot rewrite of a few megabytes,
blocks that size come from the arenas, where what lives beside them keeps their pages.
`tune_allocator` fixes both thresholds for the serving process (`M_MMAP_THRESHOLD`,
`M_TRIM_THRESHOLD`), which turns that adjustment off: large transient buffers go
back to the system as they are freed.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import time
from collections.abc import Callable

log = logging.getLogger("memlane.background")

TRIM_EVERY_SECONDS = 15.0
"""The least time between two trims: enough for a burst of background work to end in
one, little against the few milliseconds one costs."""

MMAP_THRESHOLD = 128 * 1024
"""Blocks at least this large are mapped on their own and unmapped when freed: glibc's
starting value, kept (glibc would raise it as blocks are freed)."""
TRIM_THRESHOLD = 128 * 1024
"""Free memory at the top of the main heap past which `free` returns it at once: glibc's
starting value, kept fixed the same way."""

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""`mallopt` parameter numbers (glibc's malloc.h)."""

Trim = Callable[[int], int]
"""`malloc_trim(pad)`: 1 when memory went back to the system."""
Mallopt = Callable[[int, int], int]
"""`mallopt(param, value)`: 1 when the value was taken."""


def glibc_trim() -> Trim | None:
    """This process's `malloc_trim` (glibc), or None where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # another C library (musl has no malloc_trim)
        return None
    return trim


def glibc_mallopt() -> Mallopt | None:
    """This process's `mallopt` (glibc), or None where the C library has none."""
    if glibc_trim() is None:  # the same libraries have both
        return None
    mallopt: Mallopt = ctypes.CDLL(None).mallopt
    return mallopt


def tune_allocator(mallopt: Mallopt | None) -> bool:
    """Fix glibc's mmap and trim thresholds (see the module's docstring): for a process
    that serves for a long time, called once at its start. True when both were taken."""
    if mallopt is None:
        return False
    taken = [mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD), mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)]
    if not all(taken):
        log.debug("mallopt refused a threshold: %r", taken)
    return all(taken)


class HeapTrim:
    """When to give free heap memory back, and doing it (from a worker thread)."""

    def __init__(
        self,
        trim: Trim | None,
        *,
        every: float = TRIM_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = trim
        self.every = every
        self._clock = clock
        self._last = clock()
        self.trims = 0
        """How many trims ran (for `memlane status` and tests)."""

    def due(self) -> bool:
        """Whether a trim is due now; when it is, the next is `every` seconds away."""
        if self._trim is None:
            return False
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        return True

    def run(self) -> None:
        """Trim (blocking: call it in a worker thread)."""
        if self._trim is None:
            return
        try:
            self._trim(0)
        except OSError as exc:  # never worth more than a line
            log.debug("malloc_trim failed: %r", exc)
            return
        self.trims += 1
