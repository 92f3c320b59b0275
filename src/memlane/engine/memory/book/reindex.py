"""Files to index: the catch-up at start, `memlane memory reindex`, and a person's edits.

Runs in a worker thread under the book's lock. A file is read again only when its
content hash differs from the snapshot's (`book.tree`), or the snapshot outlived its
database; a file whose entry the index already holds as it is counts as unchanged,
whichever process wrote it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from memlane.engine.memory.book.tree import Tree
from memlane.engine.memory.vectors import Progress
from memlane.files.memory_files import MemoryFileError, id_from_name
from memlane.store import Store
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


def sync_tree(tree: Tree, store: Store, progress: Progress | None) -> SyncReport:
    """Bring the index in line with every file (content-hash checked); entries whose
    files are gone leave the index."""
    report = SyncReport()
    paths = list(tree.files.scan())
    facts = store.list_facts(include_deleted=True)
    known = {f.id for f in facts}
    if facts and not paths and not tree.snapshot.path.exists():
        paths = _write_files_of(tree, facts)
    present: set[str] = set()
    on_disk: set[str] = set()
    for number, path in enumerate(paths, start=1):
        rel = tree.files.relative(path)
        on_disk.add(rel)
        report.scanned += 1
        outcome = index_path(tree, store, path, rel, present, known)
        if outcome == "indexed":
            report.indexed += 1
        elif outcome == "unchanged":
            report.unchanged += 1
        else:
            report.skipped.append(outcome)
        if progress is not None:
            progress(number, len(paths))
    for rel in list(tree.snapshot.paths()):
        if rel not in on_disk:
            tree.snapshot.pop(rel)
    for fact_id in known - present:
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
        tree.files.write(fact)
    return list(tree.files.scan())


def index_path(
    tree: Tree,
    store: Store,
    path: Path,
    rel: str,
    present: set[str],
    known: set[str] | None = None,
) -> str:
    """Index one file if it changed; returns "indexed", "unchanged" or why it was skipped.

    `present` collects the ids found on disk; `known` (the ids in the store) guards
    against a snapshot that outlived its database; None trusts the snapshot.
    """
    seen = tree.snapshot.get(rel)
    try:
        entry = tree.files.read(path)
    except MemoryFileError as exc:
        log.warning("memory file skipped: %s", exc)
        if seen is not None:
            present.add(seen.fact_id)  # keep the last good version in the index
        named = id_from_name(path.name)
        if named:
            present.add(named)
        return str(exc)
    fact = entry.fact
    if fact.id in present:
        log.warning("memory file %s skipped: id %s is already used by another file", path, fact.id)
        return f"{path}: duplicate id {fact.id}"
    present.add(fact.id)
    indexed = known is None or fact.id in known
    if seen is not None and seen.digest == entry.digest and indexed:
        return "unchanged"
    stored = store.get_fact(fact.id) if indexed else None
    if stored is not None and same_entry(stored, fact):  # written by memlane (any process)
        tree.snapshot.set(rel, entry.digest, fact.id)
        return "unchanged"
    store.put_fact(fact)
    if fact.deleted:
        # a tombstone's file says when it was deleted (valid_to, else its last update)
        ended = fact.valid_to or fact.updated_at
        store.delete_fact(
            fact.id, replaced_by=fact.replaced_by, at=ended, updated_at=fact.updated_at
        )
    tree.snapshot.set(rel, entry.digest, fact.id)
    return "indexed"


def apply_changes(tree: Tree, store: Store, paths: Sequence[Path]) -> int:
    """Re-index files a person created, edited or deleted; returns how many changed."""
    files, snapshot = tree.files, tree.snapshot
    changed = 0
    for path in paths:
        if not files.is_entry_path(path):
            continue
        rel = files.relative(path)
        if path.exists():
            if index_path(tree, store, path, rel, set()) == "indexed":
                changed += 1
            continue
        seen = snapshot.pop(rel)
        fact_id = seen.fact_id if seen is not None else id_from_name(path.name)
        if fact_id is None or snapshot.paths_of(fact_id):
            continue
        fact = store.get_fact(fact_id)
        if fact is None or files.find(fact) is not None:
            continue  # memlane moved or removed it itself (this process or another)
        store.purge_fact(fact_id)
        changed += 1
    tree.save()
    return changed


def same_entry(a: Fact, b: Fact) -> bool:
    """Whether two entries say the same (the store's content hash aside): a file memlane
    wrote and the index holds as it is need not be indexed again."""
    return all(
        getattr(a, f.name) == getattr(b, f.name) for f in fields(Fact) if f.name != "content_hash"
    )
