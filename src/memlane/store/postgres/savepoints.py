"""The savepoints of one PostgreSQL transaction: one per write inside it, undone alone.

Each write the store's writer runs inside its batch's transaction is a savepoint
(`PostgresConnection.transaction`). A savepoint is a round trip to enter and, with
psycopg's nested `Transaction`, another to release. Releasing changes nothing a commit
would not do: so a write's savepoint stays open when it succeeds, and is released in
the same command as the next one at its depth (`RELEASE w0; SAVEPOINT w0`, one round
trip), or by the transaction's `COMMIT`. Released rather than left open, the savepoints
of a batch's writes stay side by side, not nested hundreds deep.

Named by their depth, as SQLite's (`sqlite.connection._Savepoint`): releasing or rolling
back to `wN` ends every savepoint opened after it, which `_open` keeps in step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from memlane.store.base import StoreError


class Savepoints:
    """The savepoints of the transaction one connection holds."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._open: list[bool] = []
        """Per depth, whether a savepoint of that depth's name is open (left unreleased)."""
        self._depth = 0

    @contextmanager
    def write(self) -> Iterator[None]:
        """A savepoint around the block: undone alone when it raises, or when one of its
        statements failed and the error was caught (PostgreSQL refuses everything after
        a failed statement, so a commit would drop the block's writes without a word)."""
        depth = self._depth
        name = f"w{depth}"
        opened = depth < len(self._open) and self._open[depth]
        self._conn.execute(f"RELEASE {name}; SAVEPOINT {name}" if opened else f"SAVEPOINT {name}")
        del self._open[depth:]
        self._open.append(True)
        self._depth = depth + 1
        try:
            yield
            failed_inside(self._conn)
        except BaseException:
            self._conn.execute(f"ROLLBACK TO SAVEPOINT {name}")  # it stays open
            del self._open[depth + 1 :]
            raise
        finally:
            self._depth = depth


def failed_inside(conn: psycopg.Connection[Any]) -> None:
    """Raise if a statement of the transaction failed and its error was caught on the way:
    PostgreSQL has refused everything since, and a commit would silently roll it all back."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        raise StoreError(
            "a statement failed inside a transaction and its error was caught; "
            "nothing of the transaction is kept (wrap a write that may fail in "
            "`store.transaction()` to undo it alone)"
        )
