"""WAL checkpoints in a background thread, so no write waits for one.

SQLite copies the WAL back into the database file when the WAL passes 1000
pages (~4 MB), in whichever connection commits at that moment: that commit
pays for copying the pages and two fsyncs (milliseconds to tens of them), about
one request in twenty on the proxy. The store turns the automatic checkpoint
off on its connections and lets one daemon thread run a PASSIVE checkpoint
(it never blocks writers or readers) once the WAL passes the same size.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("memlane.store")

WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024
"""Checkpoint once the WAL file is this large (SQLite's own default, 1000 pages of 4 KiB)."""
CHECK_EVERY = 16
"""Commits between two looks at the WAL file's size (a stat)."""
STOP_SECONDS = 5.0
THREAD_NAME = "memlane-checkpoint"
"""The checkpointer's thread's name, before its WAL file's."""


class Checkpointer:
    """Watches the WAL's size after commits and checkpoints it from its own thread."""

    def __init__(self, database: Path, connect: Callable[[], sqlite3.Connection]) -> None:
        self.wal = database.with_name(database.name + "-wal")
        self._connect = connect
        self._commits = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.checkpoints = 0
        """Checkpoints run so far (for tests and logs)."""

    def committed(self) -> None:
        """Called after every commit: a counter, and a stat every `CHECK_EVERY` commits."""
        self._commits += 1
        if self._commits % CHECK_EVERY:
            return
        try:
            size = self.wal.stat().st_size
        except OSError:
            return
        if size >= WAL_CHECKPOINT_BYTES:
            self._ensure_thread()
            self._wake.set()

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """End the thread (after a checkpoint in progress finishes)."""
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_SECONDS)

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._run, name=f"{THREAD_NAME} {self.wal.name}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._connect().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.checkpoints += 1
            except Exception as exc:  # the store may be closing; the next one retries
                log.warning("WAL checkpoint of %s failed: %s", self.wal, exc)
