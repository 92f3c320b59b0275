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
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from memlane.store.documents import Doc
from memlane.store.rows import Row

Statement = tuple[str, Sequence[Any]]
"""SQL text with `?` marks, and its parameters."""


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

    def json_values(self, column: str, key: str) -> str:
        """SQL for a table of one text column, `value`: the string under the top-level
        `key` of the JSON object in `column`, or each element of the array there (no row
        for anything else). What a person reads in a JSON field, never its keys or
        punctuation; `key` is a name in memlane's code, never a user's text."""
        ...

    def one(self, sql: str, *params: Any) -> Row | None: ...

    def all(self, sql: str, *params: Any) -> list[Row]: ...

    def column(self, sql: str, *params: Any) -> list[Any]:
        """The first column of every row: no row object per row (a turn reads a whole
        session's stored fingerprints this way in front of its request)."""
        ...

    def run(self, sql: str, *params: Any) -> int:
        """Execute a statement; return the rows it changed."""
        ...

    def insert(self, sql: str, *params: Any) -> int:
        """Execute an INSERT of one row into a table with an `id` key; return the new id."""
        ...

    def reads(self, *statements: Statement) -> list[list[Row]]:
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

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every write of this thread inside commits together, as one transaction (a
        backend's `_writing` runs in the one this thread holds: as a savepoint on SQLite,
        joined on PostgreSQL, which overrides this to make the savepoint here)."""
        with self._writing():
            yield

    def batch(self) -> AbstractContextManager[None]:
        """`transaction` (one writer at a time already, on a backend with a write lock)."""
        return self.transaction()

    @abstractmethod
    def _put_doc(self, db: D, doc: Doc, document: str | None = None) -> None:
        """Insert or refresh one search document (`document`: what the keyword index
        reads, when it is more than the text)."""


class Where:
    """A WHERE clause made of the conditions that apply to one query, with their parameters
    in order; no condition, no clause. Rendered with a trailing space: `FROM t {where}ORDER`."""

    def __init__(self) -> None:
        self.conditions: list[str] = []
        self.params: list[Any] = []

    def add(self, condition: str, *params: Any) -> Where:
        self.conditions.append(condition)
        self.params.extend(params)
        return self

    def equal(self, column: str, value: Any) -> Where:
        """`column = value`; a None value restricts nothing."""
        return self if value is None else self.add(f"{column} = ?", value)

    def __str__(self) -> str:
        return f"WHERE {' AND '.join(self.conditions)} " if self.conditions else ""


def select(
    db: Db, columns: str, table: str, where: Where, order: str, limit: int | None = None
) -> list[Row]:
    """`columns` of the rows of `table` that `where` lets through, in `order`, the first
    `limit` (None: all)."""
    bound, more = limited(limit)
    return db.all(
        f"SELECT {columns} FROM {table} {where}ORDER BY {order}{bound}", *where.params, *more
    )


def page(
    db: Db,
    columns: str,
    table: str,
    where: Where,
    order: str,
    *,
    limit: int,
    offset: int,
    counting: Where | None = None,
) -> tuple[list[Row], int]:
    """One page of what `select` lists, from `offset`, and how many rows match in all, read
    together (`counting`: conditions that find the same rows faster for a count)."""
    counted = where if counting is None else counting
    rows, total = db.reads(
        (
            f"SELECT {columns} FROM {table} {where}ORDER BY {order} LIMIT ? OFFSET ?",
            [*where.params, limit, offset],
        ),
        (f"SELECT count(*) AS n FROM {table} {counted}", counted.params),
    )
    return rows, int(total[0]["n"])


def json_key(key: str) -> str:
    """`key`, a JSON field's name as SQL text may hold it (`Db.json_values`): a plain name."""
    if not key.isidentifier():
        raise ValueError(f"not a JSON field name memlane uses: {key!r}")
    return key


def marks(values: Collection[Any]) -> str:
    return ", ".join("?" for _ in values)


def among(column: str, values: Sequence[Any]) -> str:
    """`column IN (?, …)`, or a condition no row meets when `values` is empty."""
    return f"{column} IN ({marks(values)})" if values else "1 = 0"


def limited(limit: int | None) -> tuple[str, list[Any]]:
    """A LIMIT clause and its parameter; none for `None`."""
    return ("", []) if limit is None else (" LIMIT ?", [limit])
