"""SQL that both backends run as written, through a small `Db` handle.

Most of what the store does is the same statement on SQLite and PostgreSQL:
only the parameter marks, how a timestamp or a JSON value is bound, the
column that keeps insertion order and whether a session's row can be locked
differ. Shared code writes its SQL once, with `?` marks, against `Db`; each
backend's handle binds it (`store.sqlite.connection`, `store.postgres.connection`).
What really differs (appending with the index, search, copying a store) stays
in the backend's package, behind the hooks of `SqlStore`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from memlane.store.documents import Doc
from memlane.store.rows import Row


class Db(Protocol):
    """One connection inside one transaction (or autocommit reads), SQL with `?` marks."""

    seq: str
    """The column that keeps insertion order, for ties: `rowid` or `seq`."""
    lock: str
    """What makes a `SELECT` of one row hold that row until commit ("" where the
    backend's write lock already covers it)."""

    def time(self, value: datetime) -> Any:
        """A timestamp as the backend binds it."""
        ...

    def json(self, value: Any) -> Any:
        """A JSON value as the backend binds it."""
        ...

    def one(self, sql: str, *params: Any) -> Row | None: ...

    def all(self, sql: str, *params: Any) -> list[Row]: ...

    def run(self, sql: str, *params: Any) -> int:
        """Execute a statement; return the rows it changed."""
        ...

    def insert(self, sql: str, *params: Any) -> int:
        """Execute an INSERT of one row into a table with an `id` key; return the new id."""
        ...

    def reads(self, *statements: tuple[str, Sequence[Any]]) -> list[list[Row]]:
        """Several reads in order, in one round trip where the backend can."""
        ...


D = TypeVar("D", bound=Db)


class SqlStore(ABC, Generic[D]):
    """What the shared role implementations need from a backend.

    Reads go through `_reading`, writes through `_writing` (one transaction,
    committed on success); both hand out the backend's `Db`.
    """

    @abstractmethod
    def _reading(self) -> AbstractContextManager[D]: ...

    @abstractmethod
    def _writing(self) -> AbstractContextManager[D]: ...

    @abstractmethod
    def _put_doc(self, db: D, doc: Doc, document: str | None = None) -> None:
        """Insert or refresh one search document (`document`: what the keyword index
        reads, when it is more than the text)."""


def marks(values: Collection[Any]) -> str:
    return ", ".join("?" for _ in values)


def among(column: str, values: Sequence[Any]) -> str:
    """`column IN (?, …)`, or a condition no row meets when `values` is empty."""
    return f"{column} IN ({marks(values)})" if values else "1 = 0"


def limited(limit: int | None) -> tuple[str, list[Any]]:
    """A LIMIT clause and its parameter; none for `None`."""
    return ("", []) if limit is None else (" LIMIT ?", [limit])
