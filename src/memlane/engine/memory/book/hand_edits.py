"""A person's changes to the memory files while memlane runs, taken into the index.

Two ways in, both under the book's lock in a worker thread: the files the watcher
reports (`apply_changes`), and, before a commit of the whole tree, the files changed
since the last look (`take_in`), so what a person typed is redacted before git takes it
(`book.reindex` indexes each file; `Tree.skipped` remembers the files it skipped). What
changed by hand comes back as `HandChanges`, which names its commit.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memlane.engine.memory.book.reindex import INDEXED, UNCHANGED, index_path
from memlane.engine.memory.book.tree import Tree
from memlane.files.memory_checks import valid_id
from memlane.files.memory_files import MemoryFileError, digest_bytes, id_from_name
from memlane.store import Store

log = logging.getLogger("memlane.memory")

LISTED = 50
"""Files a hand-edit commit message names at most."""
MTIME_SLACK_NS = 2_000_000_000
"""`take_in` also reads files changed this long before its last look: some file systems
keep a file's times to the second (two for FAT)."""


@dataclass
class HandChanges:
    """Files a person changed, by what it did to memory (paths relative to the root)."""

    added: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Written or changed, but not taken in (broken, a duplicate id, too big, a link)."""

    def __len__(self) -> int:
        return len(self.added) + len(self.edited) + len(self.removed) + len(self.skipped)

    def message(self) -> str:
        """The commit message: how many files of each kind, then the files."""
        kinds = [
            ("added", self.added),
            ("edited", self.edited),
            ("removed", self.removed),
            ("not indexed", self.skipped),
        ]
        counted = [(kind, len(rels)) for kind, rels in kinds if rels]
        total = len(self)
        files = f"{total} file{'s' if total != 1 else ''}"
        if counted == [("not indexed", total)]:
            head = f"memory: {files} changed by hand, not indexed"
        elif len(counted) == 1:
            head = f"memory: {files} {counted[0][0]} by hand"
        else:
            head = f"memory: {files} changed by hand ({', '.join(f'{n} {k}' for k, n in counted)})"
        listing = [f"{kind}: {rel}" for kind, rels in kinds for rel in rels]
        more = len(listing) - LISTED
        tail = [f"… and {more} more"] if more > 0 else []
        return "\n".join([head, "", *listing[:LISTED], *tail])


def apply_changes(tree: Tree, store: Store, paths: Sequence[Path]) -> HandChanges:
    """Re-index files a person created, edited or deleted (memlane's own writes among
    them change nothing); returns what a person changed."""
    files, snapshot = tree.files, tree.snapshot
    changes = HandChanges()
    for path in paths:
        if not files.is_entry_path(path):
            continue
        rel = files.relative(path)
        if path.exists() or path.is_symlink():
            was = snapshot.get(rel)
            outcome = index_path(tree, store, path)
            if outcome == INDEXED:
                (changes.added if was is None else changes.edited).append(rel)
            elif outcome != UNCHANGED:
                changes.skipped.append(rel)
            now = snapshot.get(rel)
            if was is not None and (now is None or now.fact_id != was.fact_id):
                let_go(tree, store, was.fact_id)  # it holds another id, or none the index has
            continue
        seen = snapshot.pop(rel)
        skipped = rel in tree.skipped
        held = tree.skipped.pop(rel, None)
        fact_id = seen.fact_id if seen is not None else held or id_from_name(path.name)
        gone = fact_id is not None and let_go(tree, store, fact_id)
        if gone or skipped:
            changes.removed.append(rel)
    tree.save()
    return changes


def let_go(tree: Tree, store: Store, fact_id: str) -> bool:
    """The file that held `fact_id` went (or holds another id now): a duplicate skipped
    for it takes it over, else the entry leaves the index. False when another file
    holds it, or memlane moved or removed the file itself (this process or another)."""
    if tree.snapshot.paths_of(fact_id):
        return False
    for rel in sorted(r for r, held in tree.skipped.items() if held == fact_id):
        path = tree.files.root / rel
        if path.exists() and index_path(tree, store, path) in (INDEXED, UNCHANGED):
            log.info("memory file %s holds %s now (the file that held it went)", path, fact_id)
            return True
    fact = store.get_fact(fact_id)
    if fact is None:
        return False
    named = tree.files.find(fact) if valid_id(fact_id) else None
    if named is not None and _holds(tree, named, fact_id):
        return False
    store.purge_fact(fact_id)
    return True


def _holds(tree: Tree, path: Path, fact_id: str) -> bool:
    """Whether the file named after `fact_id` holds it (a broken one keeps its last good
    version, as at the catch-up), not another id a person gave it."""
    try:
        return tree.files.read(path).fact.id == fact_id
    except MemoryFileError:
        return True


def take_in(tree: Tree, store: Store, since_ns: int) -> HandChanges:
    """Before a commit of the whole tree: take in the files changed since `since_ns`
    (their content or their place: a file's change time moves with both) and the files
    gone. A stat a file; only those changed since are read, and only those whose hash is
    not the snapshot's parsed."""
    files, snapshot = tree.files, tree.snapshot
    held = snapshot.held
    after = since_ns - MTIME_SLACK_NS
    on_disk: set[str] = set()
    changed: list[Path] = []
    for path in files.scan():
        rel = files.relative(path)
        on_disk.add(rel)
        try:
            status = path.lstat()
            if max(status.st_mtime_ns, status.st_ctime_ns) < after:
                continue
            seen = snapshot.get(rel)
            regular = stat.S_ISREG(status.st_mode)
            if seen is not None and regular and digest_bytes(path.read_bytes()) == seen.digest:
                continue  # as indexed (memlane's own, mostly): not parsed
        except OSError:
            continue
        changed.append(path)
    gone = [rel for rel in [*snapshot.paths(), *tree.skipped] if rel not in on_disk]
    changes = apply_changes(tree, store, [*changed, *(files.root / rel for rel in gone)])
    if not held:
        snapshot.release()
    return changes
