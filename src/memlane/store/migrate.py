"""Copy a whole store into another (SQLite to PostgreSQL and back), verifying counts.

Works through the `Store` protocol only (`dump` / `load` / `count`), so any
pair of backends can be copied. The target must be empty: a copy never merges
into, or overwrites, data that is already there. Rows keep their ids, and the
target rebuilds its own search index from them; vectors travel as they are,
so nothing is re-embedded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from memlane.store.base import TABLES, StoreCopy, StoreError

BATCH_SIZE = 500

Progress = Callable[[str, int, int], None]
"""Called as (table, rows copied so far, rows in the source table)."""


@dataclass(frozen=True, slots=True)
class TableCopy:
    table: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


def store_counts(store: StoreCopy) -> dict[str, int]:
    """Rows per table, in `TABLES` order."""
    return {table: store.count(table) for table in TABLES}


def copy_store(
    source: StoreCopy,
    target: StoreCopy,
    *,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> list[TableCopy]:
    """Copy every table of `source` into the empty `target`; raise if a count differs after."""
    if batch_size < 1:
        raise StoreError(f"batch size must be at least 1, not {batch_size}")
    occupied = {table: n for table, n in store_counts(target).items() if n}
    if occupied:
        held = ", ".join(f"{n} {table}" for table, n in occupied.items())
        raise StoreError(
            f"the target store {target.url} is not empty ({held}); copy into an empty store"
        )
    totals = store_counts(source)
    for table in TABLES:
        done = 0
        if progress is not None:
            progress(table, done, totals[table])
        for batch in _batches(source.dump(table), batch_size):
            target.load(table, batch)
            done += len(batch)
            if progress is not None:
                progress(table, done, max(totals[table], done))
    result = [TableCopy(table, source.count(table), target.count(table)) for table in TABLES]
    wrong = [c for c in result if not c.ok]
    if wrong:
        detail = ", ".join(f"{c.table}: {c.source} in the source, {c.target} copied" for c in wrong)
        raise StoreError(
            f"the copy is incomplete ({detail}); the source is unchanged, the target holds a "
            "partial copy: empty it before trying again"
        )
    return result


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[Mapping[str, Any]]]:
    batch: list[Mapping[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
