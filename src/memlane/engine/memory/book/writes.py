"""Entries to their files and the index, and the group commit of writes that wait.

What runs in a worker thread under the book's lock (`MemoryBook.writing`): new or
changed entries written, others tombstoned or erased, the snapshot noted
(`book.tree`) and the day's counters added. Writes that wait for the lock meanwhile
(other sessions' batches) are taken together, up to `GROUP_ENTRIES`, and written in
one thread hop; one that fails is retried alone, so only its caller sees the failure.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from memlane.engine import turnlog
from memlane.engine.memory.book.tree import Tree
from memlane.files.memory_files import MemoryFiles, now_utc
from memlane.store import Store
from memlane.text.redact import redact
from memlane.types import Fact

GROUP_ENTRIES = 1024
"""The most entries one group of waiting writes puts in one thread hop: under load every
session's batch waits for the book's lock, and a group that took few would leave the
writer behind the turns (each hop also waits for the requests in hand)."""
ROWS_PER_TRANSACTION = 64
"""Index rows written per store transaction: one per entry queued each alone at the
store's write gate behind every request's writes; one for a thousand would hold the
requests' writes back while it runs."""

Tombstones = Sequence[tuple[Fact, str | None]]
"""Entries to tombstone, each with the id of the entry that replaced it (or None)."""
Apply = Callable[[Sequence[Fact], Tombstones, Collection[str]], None]
"""Writes puts and tombstones (`new`: ids just minted) in the calling thread."""
Row = tuple[int, Callable[[], object]]
"""A store write of `write_entries`, with how many index rows it writes."""


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One caller's entries waiting for the book's lock."""

    puts: Sequence[Fact]
    tombstones: Tombstones
    new: Collection[str]
    done: asyncio.Future[None]

    @property
    def size(self) -> int:
        return len(self.puts) + len(self.tombstones)


def take_group(waiting: Sequence[PendingWrite]) -> tuple[list[PendingWrite], list[PendingWrite]]:
    """The writes waiting, oldest first, up to `GROUP_ENTRIES` entries (at least one), and
    the writes left waiting: one thread hop stays short; the rest go in the next group."""
    group: list[PendingWrite] = []
    size = 0
    for index, each in enumerate(waiting):
        size += each.size
        if group and size > GROUP_ENTRIES:
            return group, list(waiting[index:])
        group.append(each)
    return group, []


def write_group(group: Sequence[PendingWrite], apply: Apply) -> list[BaseException | None]:
    """Every write of the group at once; when that fails, each alone, so only the caller
    whose write fails sees the failure. One outcome per write, in order."""
    puts = [fact for w in group for fact in w.puts]
    tombstones = [pair for w in group for pair in w.tombstones]
    new = {fact_id for w in group for fact_id in w.new}
    try:
        apply(puts, tombstones, new)
    except Exception as exc:
        if len(group) == 1:
            return [exc]
        return [write_group([w], apply)[0] for w in group]
    return [None] * len(group)


def settle(group: Sequence[PendingWrite], outcomes: Sequence[BaseException | None]) -> None:
    """Tell each caller of the group how its write went."""
    for each, failure in zip(group, outcomes, strict=True):
        if failure is None:
            each.done.set_result(None)
        else:
            each.done.set_exception(failure)


def abandon(group: Sequence[PendingWrite], exc: BaseException) -> None:
    """The writer was stopped (cancelled at shutdown) or failed past the writes: every
    caller of its group is told its write is not confirmed."""
    for each in group:
        if not each.done.done():
            each.done.set_exception(RuntimeError(f"memory write not confirmed: {exc!r}"))


def write_entries(
    tree: Tree | None,
    store: Store,
    puts: Sequence[Fact],
    tombstones: Tombstones,
    new: Collection[str] = (),
) -> dict[str, int]:
    """Write new or changed entries and tombstone others: every file first (embedded mode),
    then the index and the day's counters (`write_counts`, returned), together,
    `ROWS_PER_TRANSACTION` rows a transaction.

    Not one transaction per entry: a background writer waits at the store's write gate
    until no request writes (`store.write_gate`), so under load each of a group's
    hundreds of entries queued there on its own. A crash between the files and the
    index loses nothing: the files are the truth, and the next start indexes what they
    hold (`book.reindex`)."""
    counts = write_counts(store, puts, tombstones, new)
    # whatever a memory came from, a credential in it is never kept (file, git, index)
    puts = [replace(fact, text=redact(fact.text)) for fact in puts]
    # deleted means no longer true: from the moment given (a message's), else now
    tombstones = [
        (replace(fact, valid_to=fact.valid_to or max(now_utc(), fact.since)), by)
        for fact, by in tombstones
    ]
    deleted_at = _write_files(tree, puts, tombstones, new) if tree is not None else {}
    chunks = [
        puts[at : at + ROWS_PER_TRANSACTION] for at in range(0, len(puts), ROWS_PER_TRANSACTION)
    ]
    rows: list[Row] = [(len(chunk), functools.partial(store.put_facts, chunk)) for chunk in chunks]
    rows += [
        (
            1,
            functools.partial(
                store.delete_fact,
                fact.id,
                replaced_by=replaced_by,
                at=fact.valid_to,
                updated_at=deleted_at.get(fact.id),
            ),
        )
        for fact, replaced_by in tombstones
    ]
    rows.append((1, functools.partial(turnlog.count, store, counts)))
    for group in _transactions(rows):
        with store.transaction():
            for _, row in group:
                row()
    return counts


def _transactions(rows: Sequence[Row]) -> list[list[Row]]:
    """`rows` (each with how many index rows it writes) in transactions of up to
    `ROWS_PER_TRANSACTION` rows, in order: a turn's entries and the day's counters commit
    once, not once each (a commit costs the keyword index's catch-up too)."""
    groups: list[list[Row]] = []
    size = 0
    for row in rows:
        if not groups or size + row[0] > ROWS_PER_TRANSACTION:
            groups.append([])
            size = 0
        groups[-1].append(row)
        size += row[0]
    return groups


def _write_files(
    tree: Tree, puts: Sequence[Fact], tombstones: Tombstones, new: Collection[str]
) -> dict[str, datetime | None]:
    """The entries' files written (flushed together) and noted in the snapshot, their
    folders synced once; returns each tombstoned entry's deletion time as its file says
    it (the index says the same)."""
    folders: set[Path] = set()
    for scope in {fact.scope for fact in puts} | {fact.scope for fact, _ in tombstones}:
        tree.touch_scope(scope)
    for written, old in tree.files.write_many([(f, f.id in new) for f in puts], folders):
        tree.forget(old)
        tree.remember(written.path, written.digest, written.fact.id)
    MemoryFiles.sync_folders(folders)
    deleted_at: dict[str, datetime | None] = {}
    for fact, replaced_by in tombstones:
        old = tree.files.find(replace(fact, deleted=False))
        written = tree.files.move_to_deleted(fact, replaced_by=replaced_by)
        tree.forget(old)
        tree.remember(written.path, written.digest, fact.id)
        deleted_at[fact.id] = written.fact.updated_at
    return deleted_at


def write_counts(
    store: Store, puts: Sequence[Fact], tombstones: Tombstones, new: Collection[str] = ()
) -> dict[str, int]:
    """What a write adds to the day's counters: memories added, updated and forgotten, and
    turns remembered (summaries are bookkeeping, not counted). A memory in `new` (its id
    just minted) is added without asking the store whether it holds it."""
    counts = {
        turnlog.MEMORIES_ADDED: 0,
        turnlog.MEMORIES_UPDATED: 0,
        turnlog.MEMORIES_FORGOTTEN: 0,
        turnlog.TURNS_REMEMBERED: 0,
    }
    for fact in puts:
        if fact.role == "memory":
            known = fact.id not in new and store.get_fact(fact.id) is not None
            counts[turnlog.MEMORIES_UPDATED if known else turnlog.MEMORIES_ADDED] += 1
        elif fact.role in ("user", "assistant"):
            counts[turnlog.TURNS_REMEMBERED] += 1
    counts[turnlog.MEMORIES_FORGOTTEN] = sum(1 for f, _ in tombstones if f.role == "memory")
    return counts
