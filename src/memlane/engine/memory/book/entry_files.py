"""An entry's files wherever a person put them: before a deliberate write, and in a purge.

The book's writes find an entry's file by its name (`MemoryFiles.find`): one stat on
a turn's path, where memlane writes. A file a person renamed or moved keeps its id in
its front matter, and that is the memory (`files.entry_lookup`). Before a deliberate
change of an entry (`memory edit`, `forget`, `supersede`, ...), `adopt` moves the file
holding it to where the write looks and removes any other file holding the same id, so
the write replaces the memory's one file and never leaves a second one. A purge
(`erase`) looks at every file, removes each holding one of the entries, and says what
it could not do.

Both run in a worker thread under the book's lock (`MemoryBook.writing`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from memlane.engine.memory.book.tree import Tree
from memlane.files.atomic import write_atomic
from memlane.files.entry_lookup import ids_held, locate, read_head
from memlane.files.memory_checks import valid_id
from memlane.files.memory_files import DELETED, digest_bytes
from memlane.store import Store
from memlane.types import Fact

log = logging.getLogger("memlane.memory")


def adopt(tree: Tree, facts: Sequence[Fact]) -> None:
    """Give each entry one file, where the book's write looks for it: the one holding it
    moves there (`write_atomic`), any other holding the same id goes (git keeps what it
    held). The files are looked up by name, the snapshot's paths and the duplicates
    the last pass skipped (`Tree.skipped`), not by reading every file: this runs before
    every edit and forget. Entries with no file, or already in place alone, are left."""
    files = tree.files
    ids = {fact.id for fact in facts}
    skipped = [files.root / rel for rel, held in tree.skipped.items() if held in ids]
    located = locate(files, facts, snapshot=tree.snapshot, hints=skipped)
    for fact in facts:
        holders = located.of(fact.id)
        if not holders:
            continue
        home = files.find(fact)
        if home is not None and home not in holders:
            # named for this id, it holds another (a person changed its `id:`): the
            # write would overwrite it, so it takes the name of the id it holds
            if _rename_for_its_id(tree, home, fact.id) is not None:
                continue  # left where it is, with a warning
            home = None
        keep = home if home is not None else _nearest(tree, fact, holders)
        if keep != home:
            _move(tree, keep, files.path_for(fact), fact.id)
            keep = files.path_for(fact)
        for other in holders:
            if other != keep:
                files.remove(other)
                tree.forget(other)


def _move(tree: Tree, path: Path, target: Path, fact_id: str) -> None:
    """Copied, then removed: a crash between leaves two files, never none."""
    data = path.read_bytes()
    write_atomic(target, data)
    tree.remember(target, digest_bytes(data), fact_id)
    tree.files.remove(path)
    tree.forget(path)


def _rename_for_its_id(tree: Tree, path: Path, fact_id: str) -> Path | None:
    """Give the file named for `fact_id` that holds one other id the name of that id;
    None when done, else the path, left where it is (nothing else it could be named)."""
    held = ids_held(read_head(path), path.name)
    other = next(iter(held), "")
    if len(held) != 1 or not valid_id(other):
        log.warning("memory %s: %s holds another id; it is left where it is", fact_id, path)
        return path
    target = path.with_name(path.name.replace(f"__{fact_id}.md", f"__{other}.md"))
    if target == path or target.exists():
        log.warning("memory %s: %s holds another id; it is left where it is", fact_id, path)
        return path
    _move(tree, path, target, other)
    return None


def _nearest(tree: Tree, fact: Fact, holders: list[Path]) -> Path:
    """The file to keep among several: one as deleted as the entry, else the first."""
    for path in holders:
        if _is_deleted(tree, path) == fact.deleted:
            return path
    return holders[0]


def _is_deleted(tree: Tree, path: Path) -> bool:
    parts = path.relative_to(tree.files.entries).parts
    return len(parts) > 2 and parts[1] == DELETED


def erase(tree: Tree | None, store: Store, facts: Sequence[Fact]) -> list[str]:
    """Remove entries entirely (`--purge`): every file holding one, active or deleted,
    wherever it is and whatever its name (each file of the entries folder is looked at),
    and their rows. Returns what could not be done: a file left holding one, or one that
    could not be read, which may."""
    left: list[str] = []
    if tree is not None:
        located = locate(tree.files, facts, every=True)
        for path in located.every():
            try:
                tree.files.remove(path)
            except OSError as exc:
                left.append(f"{path} still holds it: it could not be removed ({exc})")
            tree.forget(path)
        unread = located.unread_note()
        if unread is not None:
            left.append(unread)
    for fact in facts:
        store.purge_fact(fact.id)
    return left
