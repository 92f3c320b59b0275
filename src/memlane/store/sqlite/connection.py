"""Connections to the SQLite file: one per thread, every write one IMMEDIATE transaction.

Each thread gets its own connection, with a bounded page cache (`PAGE_CACHE_KIB`) and
no memory map, so what SQLite holds is at most that many pages per thread that uses
the store; a connection whose thread has ended is closed when the next one opens
(a thread pool that replaces its threads would otherwise leave one open per thread it
ever had). Every write is one `BEGIN IMMEDIATE`
transaction, so a writer waits (busy timeout) instead of failing, and a crash
loses at most the transaction in flight. `synchronous=normal` survives a
process crash; `full` also survives power loss.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Literal

from memlane.store.base import StoreError
from memlane.store.sql import SqlStore
from memlane.store.sqlite.checkpoint import Checkpointer
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.process_lock import ProcessLock
from memlane.store.sqlite.schema import ForeignDatabase, NewerSchema, check, migrate
from memlane.store.write_gate import WriteGate

BUSY_TIMEOUT_MS = 10_000
PAGE_CACHE_KIB = 2048
"""The page cache of each connection, in KiB (`PRAGMA cache_size`): set here rather than
left to the library's build, which a distribution may raise. The proxy's threads that use
the store are its request threads (`min(32, cores + 4)`), two background threads, the
writers and the checkpointer: 7 under the 200-client soak on two cores, so its SQLite
caches held 2 to 10 MB there, and at most 2 MiB a thread however large the file grows:
enough for the b-trees' inner pages, which every lookup reads; the rest comes from the
operating system's file cache."""
MMAP_SIZE = 0
"""No memory-mapped reads (`PRAGMA mmap_size`): a map would count the file's pages it
touched in the proxy's resident memory, up to the file's size."""
PURGE_TRIES = 100
"""Attempts (0.1 s apart) to truncate the WAL while another process reads."""


class SQLiteConnection(SqlStore[SQLiteDb]):
    """One connection per thread to one SQLite file, opened (and migrated) once."""

    def __init__(self, path: Path, *, synchronous: Literal["normal", "full"] = "normal") -> None:
        self.path = Path(path).expanduser().absolute()
        self.url = f"sqlite:///{self.path}"
        if synchronous not in ("normal", "full"):
            raise StoreError(f"sqlite synchronous must be 'normal' or 'full', not {synchronous!r}")
        self._synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._write_lock = WriteGate()
        self._process_lock = ProcessLock(self.path)
        self._connections: dict[threading.Thread, sqlite3.Connection] = {}
        self.checkpointer = Checkpointer(self.path, self._conn)
        self._closed = False
        self._in_flight = 0  # reads and transactions running now, in any thread
        self._idle = threading.Condition(self._lock)
        self._open()

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for the database {self.path}: {exc.strerror or exc}; "
                "choose a writable MEMLANE_HOME"
            ) from None
        if self.path.exists() and not self.path.is_file():
            raise StoreError(
                f"{self.path} is not a database file; move it aside or choose another MEMLANE_HOME"
            )
        try:
            conn = self._conn()
            check(conn)  # before anything writes: a refused file must stay as it was
            use_wal(conn)
            migrate(conn)
        except ForeignDatabase as exc:
            self.close()
            raise StoreError(
                f"{self.path} is a SQLite database of another application (tables: "
                f"{', '.join(exc.args[0][:5])}); memlane leaves it alone: choose another "
                "MEMLANE_HOME"
            ) from None
        except NewerSchema as exc:
            self.close()
            raise StoreError(
                f"{self.path} was written by a newer memlane (migrations "
                f"{', '.join(exc.args[0])}); upgrade memlane to open it"
            ) from None
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(explain(self.path, exc)) from None

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"the store {self.path} is closed")
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA secure_delete = ON")  # deleted text is overwritten, not left
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # `sqlite.checkpoint` does it
            conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
            conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")
            # savepoints' statement journals, past 64 KiB, in memory and not in /var/tmp
            conn.execute("PRAGMA temp_store = MEMORY")
        except sqlite3.DatabaseError as exc:
            raise StoreError(explain(self.path, exc)) from None
        self._local.conn = conn
        with self._lock:
            ended = [t for t in self._connections if not t.is_alive()]
            gone = [self._connections.pop(t) for t in ended]
            self._connections[threading.current_thread()] = conn
        for each in gone:  # their threads ended: nothing can be using them
            each.close()
        return conn

    @property
    def open_connections(self) -> int:
        """How many connections are open: one per live thread that used the store (at most
        one more per thread that ended since the last connection was opened)."""
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        """Close every thread's connection, once the reads and writes running now are done.

        Closing a connection another thread is using crashes the process inside SQLite,
        and a call can outlive its caller (a request that went away leaves its store
        call to finish in a worker thread). New calls are refused from here on; the
        wait for running ones is bounded by the busy timeout.
        """
        self.checkpointer.stop()
        with self._lock:
            self._closed = True
            self._idle.wait_for(lambda: not self._in_flight, timeout=BUSY_TIMEOUT_MS / 1000)
            connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            conn.close()
        self._process_lock.close()
        self._local = threading.local()

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        """Around every use of a connection, so `close` can wait for it."""
        with self._lock:
            if self._closed:
                raise StoreError(f"the store {self.path} is closed")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.notify_all()

    def purge_deleted(self) -> None:
        """Checkpoint the WAL into the file and truncate it (see `Store.purge_deleted`);
        a reader in another process can hold it back for a while, not forever."""
        with self._in_use():
            self._purge_deleted()

    def _purge_deleted(self) -> None:
        conn = self._conn()
        for _ in range(PURGE_TRIES):
            if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
                raise StoreError(f"the database {self.path} stayed locked by a writer; retry")
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise StoreError(explain(self.path, exc)) from None
            finally:
                self._write_lock.release()
            if not busy:
                return
            time.sleep(0.1)
        raise StoreError(
            f"{self.path}-wal could not be emptied: another process keeps reading the database; "
            "stop it (memlane serve?) and purge again"
        )

    def _writing(self) -> AbstractContextManager[SQLiteDb]:
        """One IMMEDIATE transaction, or a savepoint inside the one this thread holds."""
        held: SQLiteDb | None = getattr(self._local, "held", None)
        if held is None:
            return self._holding()
        # Inside `transaction()`: a write that fails undoes itself, not the others.
        return _Savepoint(self._local, held)

    @contextmanager
    def _holding(self) -> Iterator[SQLiteDb]:
        with self._transaction() as db:
            self._local.held = db
            try:
                yield db
            finally:
                self._local.held = None

    @contextmanager
    def _transaction(self) -> Iterator[SQLiteDb]:
        """One IMMEDIATE transaction: the write lock is taken up front, so no upgrade deadlock.

        Threads of this process first queue on a Python lock: SQLite's busy handler
        polls with sleeps of up to 100 ms, so a writer waiting on another thread of
        the same proxy would otherwise sleep (and poll) long after the lock is free.
        The lock lets a request's write go before waiting background writes
        (`store.write_gate`). Other processes queue on a file lock (`process_lock`). The
        WAL is checkpointed by a background thread (`sqlite.checkpoint`), never by the
        committing write.
        """
        with self._in_use(), self._immediate() as db:
            yield db
        self._committed()

    @contextmanager
    def _immediate(self) -> Iterator[SQLiteDb]:
        conn = self._conn()
        if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            raise StoreError(
                f"the database {self.path} stayed locked by another writer in this process for "
                f"{BUSY_TIMEOUT_MS // 1000} s; retry"
            )
        try:
            self._process_lock.acquire()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise StoreError(explain(self.path, exc)) from None
            try:
                yield SQLiteDb(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                conn.execute("ROLLBACK")
                raise StoreError(explain(self.path, exc)) from None
        finally:
            self._process_lock.release()
            self._write_lock.release()

    def _committed(self) -> None:
        """After a transaction of this process committed (outside the write lock)."""
        self.checkpointer.committed()

    @contextmanager
    def _reading(self) -> Iterator[SQLiteDb]:
        """Reads outside a transaction: each statement sees the last commit."""
        with self._in_use():
            try:
                yield SQLiteDb(self._conn())
            except sqlite3.DatabaseError as exc:
                raise StoreError(explain(self.path, exc)) from None


class _Savepoint:
    """One write inside the transaction this thread holds, undone alone when it fails.

    Named by their depth, the savepoints of every write are the same few statements,
    which the connection prepares once (a name per write evicted the statements it had
    cached); a class rather than a generator, as every write of a batch enters one.
    """

    __slots__ = ("_db", "_depth", "_local")

    def __init__(self, local: threading.local, db: SQLiteDb) -> None:
        self._local = local
        self._db = db
        self._depth = 0

    def __enter__(self) -> SQLiteDb:
        depth: int = getattr(self._local, "depth", 0)
        self._db.conn.execute(f"SAVEPOINT w{depth}")
        self._depth = depth
        self._local.depth = depth + 1
        return self._db

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        depth = self._depth
        try:
            if kind is not None:
                self._db.conn.execute(f"ROLLBACK TO w{depth}")
            self._db.conn.execute(f"RELEASE w{depth}")
        finally:
            self._local.depth = depth


def explain(path: Path, exc: sqlite3.DatabaseError) -> str:
    """One line naming the file, what is wrong, and what to do."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (
            f"{path} is not a readable memlane database ({text}); memlane left it untouched: "
            "restore it from a backup or move it aside to start a new one"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return (
            f"cannot open the database {path} for writing ({text}); check the permissions of "
            "the file and its folder, or choose another MEMLANE_HOME"
        )
    if "locked" in text or "busy" in text:
        return (
            f"the database {path} stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS // 1000} s ({text}); retry, or stop the process holding it"
        )
    return f"database error in {path}: {text}"


def use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL, retrying for up to the busy timeout.

    When two processes open a new file at once (`serve --workers 2` on a fresh home),
    SQLite answers one of the two switches "database is locked" at once, without
    waiting on the busy handler. The switch is retried with a growing pause instead.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
