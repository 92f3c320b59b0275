"""Files to index: the catch-up at start, `memlane memory reindex`, and a person's edits.

Runs in a worker thread under the book's lock. At the catch-up a file is read again
only when its content hash differs from the snapshot's (`book.tree`), or the snapshot
outlived its database; a file whose entry the index already holds as it is counts as
unchanged, whichever process wrote it. A rebuild (`memlane memory reindex`) compares
every file with its row instead, so any row that says something its file does not is
written again.

Two rules hold for every path here (`book.hand_edits` takes a person's changes in
through the same `index_path`):

- an id belongs to one file, the first holding it in the order `MemoryFiles.scan` reads
  them (`keeper`): a copy of a file under another name (`copy.md` beside
  `2026…__<id>.md`) is skipped, whether the catch-up or the watcher sees it;
- a text a person wrote is redacted (`text.redact`) before it is indexed, and its file
  written again with the redacted text, so no credential typed into a memory file is
  indexed, recalled or committed. Written again, the file matches the snapshot: the
  watcher's second look at it is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from memlane.engine.memory.book.tree import Tree
from memlane.engine.memory.vectors import Progress
from memlane.files.memory_checks import valid_id
from memlane.files.memory_files import EntryFile, MemoryFileError, id_from_name
from memlane.files.memory_snapshot import Seen
from memlane.store import Store
from memlane.text.redact import redact
from memlane.types import Fact

log = logging.getLogger("memlane.memory")


@dataclass
class SyncReport:
    """What a files → index pass did."""

    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)
    embedded: int = 0


INDEXED, UNCHANGED = "indexed", "unchanged"
"""What `index_path` did with a file; anything else it returns says why it skipped it."""


def sync_tree(
    tree: Tree, store: Store, progress: Progress | None, *, rebuild: bool = False
) -> SyncReport:
    """Bring the index in line with every file; entries whose files are gone leave the
    index. `rebuild`: every file is compared with its row, not only those whose hash
    changed (`memlane memory reindex`: it repairs a row that drifted from its file)."""
    report = SyncReport()
    paths = list(tree.files.scan())
    facts = store.list_facts(include_deleted=True)
    known = {f.id for f in facts}
    if facts and not paths and not tree.snapshot.path.exists():
        paths = _write_files_of(tree, facts)
    holders: dict[str, Path] = {}
    on_disk: set[str] = set()
    tree.skipped.clear()  # this pass finds them again
    for number, path in enumerate(paths, start=1):
        rel = tree.files.relative(path)
        on_disk.add(rel)
        report.scanned += 1
        outcome = index_path(tree, store, path, holders=holders, known=known, rebuild=rebuild)
        if outcome == INDEXED:
            report.indexed += 1
        elif outcome == UNCHANGED:
            report.unchanged += 1
        else:
            report.skipped.append(outcome)
        if progress is not None:
            progress(number, len(paths))
    for rel in list(tree.snapshot.paths()):
        if rel not in on_disk:
            tree.snapshot.pop(rel)
    for fact_id in known - holders.keys():
        store.purge_fact(fact_id)
        report.removed += 1
    tree.save(release=True)  # read again only if a person's edits come in
    return report


def _write_files_of(tree: Tree, facts: Sequence[Fact]) -> list[Path]:
    """The files of a store whose memories were never written under this root: a store
    copied here (`memlane store migrate` from PostgreSQL), or another home's opened from
    this one. Files are the truth, and with none the catch-up would purge every memory;
    this root had no snapshot either, so no file of it was ever removed by hand."""
    log.warning(
        "the store holds %d memories and %s has none of their files: writing them from the "
        "store (a store moved or opened from another home)",
        len(facts),
        tree.files.root,
    )
    for fact in facts:
        if valid_id(fact.id):  # one that is not would be no file name (`memory_checks`)
            tree.files.write(fact)
        else:
            log.warning("memory %r not written: not a memory id (it leaves the index)", fact.id)
    return list(tree.files.scan())


def keeper(holders: Iterable[Path]) -> Path:
    """Of the files holding one id, the one whose entry it is: the first in the order
    `MemoryFiles.scan` reads them. The others are skipped as duplicates."""
    return min(holders)


def index_path(
    tree: Tree,
    store: Store,
    path: Path,
    *,
    holders: dict[str, Path] | None = None,
    known: set[str] | None = None,
    rebuild: bool = False,
) -> str:
    """Index one file if it changed; returns `INDEXED`, `UNCHANGED` or why it was skipped.

    `holders`: the file found so far for each id, in `scan`'s order (the catch-up; it
    collects them). None: the other files holding the id are looked up (the watcher,
    `book.hand_edits`). `known` (the ids in the store) guards against a snapshot that
    outlived its database; None trusts the snapshot. `rebuild`: a file whose hash is the
    snapshot's is still compared with its row.
    """
    rel = tree.files.relative(path)
    seen = tree.snapshot.get(rel)
    try:
        entry = tree.files.read(path)
    except MemoryFileError as exc:
        return _unread(tree, path, seen, holders, exc)
    fact_id = entry.fact.id
    if holders is not None:
        first = holders.setdefault(fact_id, path)
        if first != path:
            return _duplicate(tree, path, first, fact_id)
    indexed = known is None or fact_id in known
    if seen is not None and seen.digest == entry.digest and indexed and not rebuild:
        return UNCHANGED
    stored = store.get_fact(fact_id) if indexed else None
    if stored is not None and same_entry(stored, entry.fact):  # as indexed: memlane wrote it
        tree.snapshot.set(rel, entry.digest, fact_id)
        tree.skipped.pop(rel, None)
        return UNCHANGED
    if holders is None:
        first = keeper([path, *_other_holders(tree, path, fact_id)])
        if first != path:
            return _duplicate(tree, path, first, fact_id)
        for other in tree.snapshot.paths_of(fact_id):
            if other != rel:  # it held the id, and a file before it in order does now
                tree.snapshot.drop(other)
                tree.skipped[other] = fact_id
    try:
        entry = _redacted(tree, entry)  # a person's text: memlane's own is redacted already
    except MemoryFileError as exc:
        return _unread(tree, path, seen, holders, exc)
    tree.skipped.pop(rel, None)
    _put(store, entry.fact)
    tree.snapshot.set(rel, entry.digest, entry.fact.id)
    return INDEXED


def _unread(
    tree: Tree, path: Path, seen: Seen | None, holders: dict[str, Path] | None, why: Exception
) -> str:
    """Skip `path`: it cannot be taken in (`why`). Its last good version stays indexed."""
    log.warning("memory file skipped: %s", why)
    kept = seen.fact_id if seen is not None and valid_id(seen.fact_id) else None
    named = id_from_name(path.name)
    tree.skipped[tree.files.relative(path)] = kept or named
    if holders is not None:
        for fact_id in (kept, named):
            if fact_id is not None:
                holders.setdefault(fact_id, path)
    return str(why)


def _duplicate(tree: Tree, path: Path, first: Path, fact_id: str) -> str:
    """Skip `path`: `first` holds its id."""
    rel = tree.files.relative(path)
    log.warning(
        "memory file %s skipped: id %s is already used by another file (%s)",
        path,
        fact_id,
        tree.files.relative(first),
    )
    tree.snapshot.drop(rel)  # not what the index holds: its next change is looked at again
    tree.skipped[rel] = fact_id
    return f"{path}: id {fact_id} is already used by another file ({tree.files.relative(first)})"


def _other_holders(tree: Tree, path: Path, fact_id: str) -> list[Path]:
    """The other files that hold `fact_id` now: the one the index has it from (the
    snapshot) and the duplicates skipped so far (`Tree.skipped`)."""
    rels = set(tree.snapshot.paths_of(fact_id))
    rels.update(rel for rel, held in tree.skipped.items() if held == fact_id)
    found = []
    for rel in sorted(rels):
        other = tree.files.root / rel
        if other == path or not other.exists():
            continue
        try:
            if tree.files.read(other).fact.id == fact_id:
                found.append(other)
        except MemoryFileError:
            continue
    return found


def _redacted(tree: Tree, entry: EntryFile) -> EntryFile:
    """`entry` with its text redacted: when that changes it, its file is written again
    with the redacted text first (what is indexed, recalled and committed is that)."""
    if redact(entry.fact.text) == entry.fact.text:
        return entry
    try:
        redone = tree.files.redo_text(entry.path, redact)
    except OSError as exc:
        raise MemoryFileError(
            f"{entry.path}: holds a credential, and cannot be written again without it: "
            f"{exc.strerror}"
        ) from None
    log.warning("memory file %s held a credential: written again with it redacted", entry.path)
    return redone


def _put(store: Store, fact: Fact) -> None:
    store.put_fact(fact)
    if fact.deleted:
        # a tombstone's file says when it was deleted (valid_to, else its last update)
        ended = fact.valid_to or fact.updated_at
        store.delete_fact(
            fact.id, replaced_by=fact.replaced_by, at=ended, updated_at=fact.updated_at
        )


def same_entry(a: Fact, b: Fact) -> bool:
    """Whether two entries say the same (the store's content hash aside): a file memlane
    wrote and the index holds as it is need not be indexed again."""
    return all(
        getattr(a, f.name) == getattr(b, f.name) for f in fields(Fact) if f.name != "content_hash"
    )
