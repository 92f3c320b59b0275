"""Connections to the PostgreSQL store: a pool, one transaction per write.

The schema is migrated when the store opens (`postgres.schema`). Every call
takes a pooled connection: a write for one transaction, a read for its statements
(autocommit); a lost server or an exhausted pool becomes a `StoreError` naming the
store (without its password).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from memlane.store.base import StoreError
from memlane.store.postgres import storable
from memlane.store.postgres.advisory import BATCH_LOCK, LOCK_CLASS
from memlane.store.postgres.db import PostgresDb
from memlane.store.postgres.savepoints import Savepoints, failed_inside
from memlane.store.postgres.schema import migrate
from memlane.store.sql import SqlStore
from memlane.store.urls import redact

Conn = psycopg.Connection[dict[str, Any]]

POOL_MAX = 10
PURGED_TABLES = ("sessions", "session_state", "messages", "events", "facts", "docs", "vectors")
"""Every table a deleted session or memory had rows in."""
CONNECT_TIMEOUT = 10
# Seconds a request waits for a free pooled connection before failing.
POOL_WAIT = 30.0


class PostgresConnection(SqlStore["PostgresDb"]):
    """A pool of connections to one PostgreSQL database, migrated when opened."""

    def __init__(self, url: str, *, pool_size: int = POOL_MAX) -> None:
        self.url = redact(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                migrate(cast("psycopg.Connection[tuple[object, ...]]", conn))
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot open the PostgreSQL store at {self.url}: {_reason(exc)} "
                "(check MEMLANE_STORE_URL, that the server runs and has the pgvector extension)"
            ) from exc
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            # each write opens its transaction (`_writing`); a read needs none (`_reading`)
            kwargs={"row_factory": dict_row, "autocommit": True},
            configure=_configure,
            open=False,
            name="memlane",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.url}") from exc
        self._closed = False
        self._local = threading.local()

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    def purge_deleted(self) -> None:
        """Rewrite the tables deleted rows lived in (see `Store.purge_deleted`). `VACUUM
        FULL` locks each table while it runs: every replica's requests on it wait."""
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            with self._pool.connection(timeout=POOL_WAIT) as conn:  # in autocommit, as VACUUM
                for table in PURGED_TABLES:
                    conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
                # old table files go at the next checkpoint; ask for it now if allowed
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                    conn.execute("CHECKPOINT")
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreError(f"the PostgreSQL store at {self.url} failed: {_reason(exc)}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every write of this thread inside commits together. Inside the transaction this
        thread holds, a savepoint (`postgres.savepoints`, one round trip): a write that
        fails undoes itself, not the others, and the caller may go on (the store's writer
        runs each queued write in one)."""
        savepoints: Savepoints | None = getattr(self._local, "savepoints", None)
        if savepoints is None:
            with self._writing():
                yield
            return
        try:
            with savepoints.write():
                yield
        except psycopg.OperationalError as exc:
            raise self._failed(exc) from exc

    @contextmanager
    def _writing(self) -> Iterator[PostgresDb]:
        """A pooled connection in one transaction: committed on success, rolled back on error.
        Inside the transaction this thread holds, that one, joined: a savepoint is a round
        trip to the server, and a turn's store calls made a dozen of them (what undoes one
        write alone is `transaction`, around it).

        A lost server or an exhausted pool becomes a `StoreError` naming the store.
        """
        held: PostgresDb | None = getattr(self._local, "held", None)
        if held is not None:
            yield held
            return
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            # An explicit transaction block, so the writes inside can be savepoints.
            with self._pool.connection(timeout=POOL_WAIT) as conn, conn.transaction():
                self._local.held = PostgresDb(conn)
                self._local.savepoints = Savepoints(conn)
                try:
                    yield self._local.held
                    failed_inside(conn)
                finally:
                    self._local.held = self._local.savepoints = None
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._failed(exc) from exc

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction that first takes the replicas' batch lock: a batch holds many
        sessions' rows (and the day's counters) until it commits, so two replicas' batches
        taking them in different orders would deadlock; one at a time, they never wait on
        each other. It is held for one commit of a few milliseconds."""
        with self._writing() as db:
            db.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, BATCH_LOCK))
            yield

    def _failed(self, exc: Exception) -> StoreError:
        return StoreError(
            f"the PostgreSQL store at {self.url} failed: {_reason(exc)} "
            "(is the server running and reachable?)"
        )

    @contextmanager
    def _reading(self) -> Iterator[PostgresDb]:
        """Inside `transaction()`, reads run in the one this thread holds (its own writes
        included). Otherwise each statement runs on its own: under PostgreSQL's READ
        COMMITTED every statement of a transaction takes a snapshot of its own anyway, so a
        transaction around reads only added a `BEGIN` and a `COMMIT`, two round trips."""
        held: PostgresDb | None = getattr(self._local, "held", None)
        if held is not None:
            yield held
            return
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            with self._pool.connection(timeout=POOL_WAIT) as conn:
                yield PostgresDb(conn)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._failed(exc) from exc


def _configure(conn: Conn) -> None:
    """Every pooled connection reads timestamps in UTC, like the SQLite backend, and stores
    what a client may send that PostgreSQL would refuse (`storable`)."""
    storable.configure(conn)
    conn.execute("SET TIME ZONE 'UTC'")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
