"""Which files hold an entry: found by the id in their front matter, not only by their name.

memlane names an entry's file `<timestamp>__<id>.md` (`MemoryFiles.path_for`), but a
person may rename it, move it to another folder or change its `id:` line, and the front
matter's id is what says which memory a file holds (`memory_files.parse`: the name's id
only when the front matter has none). `locate` finds an entry's files in three steps,
each checked against what the file's front matter says:

1. by name (`MemoryFiles.find`, active and deleted): what memlane wrote, a stat or a
   folder listing;
2. the paths the snapshot maps to the id (`files.memory_snapshot`: a person's rename is
   there once the index caught up with it);
3. only for an id neither found, or for a caller that needs every file (a purge), one
   pass over the entries folder.

Each check reads at most `HEAD_BYTES` of a file: the front matter is at its start, so
the pass costs a bounded read per file, however long the texts. A file that cannot be
read is listed apart (`Located.unread`): it may hold the entry, and a caller that must
find everything says so.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from memlane.files.memory_files import (
    MemoryFiles,
    _path_id,
    id_from_name,
    split_front_matter,
)
from memlane.files.memory_snapshot import Snapshot
from memlane.types import Fact

HEAD_BYTES = 64 * 1024
"""What is read of a file to tell which entry it holds: its front matter's share."""
_ID_LINE = re.compile(r"^id[ \t]*:[ \t]*(.*?)[ \t]*\r?$", re.MULTILINE)
_PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVER: Any = yaml.resolver.Resolver()
_TEXT_TAG = "tag:yaml.org,2002:str"


def front_matter_ids(data: bytes) -> frozenset[str] | None:
    """The ids a file's front matter names (None: it names none, so its name gives it).

    Read as `memory_files.parse` reads it; a front matter YAML cannot read (or one left
    open) is not a memory to the index, yet its `id:` lines still say whose text it is,
    and those count. Usually one id; a file whose lines and YAML disagree names both."""
    text = data.decode("utf-8", "replace")
    try:
        head, _ = split_front_matter(text)
    except ValueError:  # not closed: every line may be the front matter
        return _id_lines(text) or None
    if head is None:
        return None
    lines = _id_lines(head)
    if len(lines) == 1:
        (value,) = lines
        plain = _PLAIN_ID.fullmatch(value) is not None
        if plain and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _TEXT_TAG:
            return lines  # what memlane writes: no YAML needed
    elif not lines and "id" not in head:
        return None
    try:
        meta = yaml.load(head, Loader=_LOADER) if head.strip() else {}
    except yaml.YAMLError:
        return lines or None
    named = meta.get("id") if isinstance(meta, dict) else None
    if named is None:
        return None if isinstance(meta, dict) else lines or None
    if isinstance(named, bool) or not isinstance(named, str | int) or not str(named).strip():
        return lines or None
    return lines | {str(named).strip()}


def _id_lines(text: str) -> frozenset[str]:
    found = set()
    for match in _ID_LINE.finditer(text):
        value: str = match.group(1)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if value.strip():
            found.add(value.strip())
    return frozenset(found)


def name_id(name: str) -> str:
    """The id a file's name gives an entry whose front matter names none."""
    return id_from_name(name) or _path_id(Path(name))


def ids_held(data: bytes, name: str) -> frozenset[str]:
    """The ids of the entry a file (its bytes, its name) holds."""
    return front_matter_ids(data) or frozenset({name_id(name)})


def read_head(path: Path) -> bytes:
    """The first `HEAD_BYTES` of a regular file, never read through a link nor waiting on a
    pipe (no entry is read that way: `memory_checks.read_entry`); raises `OSError`."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    with os.fdopen(os.open(path, flags), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read(HEAD_BYTES)


@dataclass
class Located:
    """The files found holding each id asked for, and those that could not be read."""

    paths: dict[str, list[Path]]
    unread: list[Path] = field(default_factory=list)

    def of(self, fact_id: str) -> list[Path]:
        return self.paths.get(fact_id, [])

    def every(self) -> list[Path]:
        return sorted({path for paths in self.paths.values() for path in paths})

    def unread_note(self) -> str | None:
        """What a caller that must find every file says of those it could not read."""
        if not self.unread:
            return None
        shown = ", ".join(str(path) for path in self.unread[:5])
        more = f" and {len(self.unread) - 5} more" if len(self.unread) > 5 else ""
        return f"{shown}{more} could not be read, and may hold it"


def locate(
    files: MemoryFiles,
    facts: Sequence[Fact],
    *,
    snapshot: Snapshot | None = None,
    hints: Iterable[Path] = (),
    every: bool = False,
) -> Located:
    """The files holding each of `facts`, wherever they are (see the module docstring).

    `every`: look at every file of the entries folder, for copies and duplicates too
    (a purge); otherwise by name, the `snapshot`'s paths and the `hints` (other files
    known to hold one: duplicates a pass skipped), the folder read only for an id none
    of them found. The snapshot is left as held as it was."""
    ids = {fact.id for fact in facts}
    found: dict[str, set[Path]] = {fact_id: set() for fact_id in ids}
    unread: list[Path] = []
    checked: set[Path] = set()

    def check(paths: Iterable[Path]) -> None:
        for path in paths:
            if path in checked:
                continue
            checked.add(path)
            if path.is_symlink() or not path.is_file():
                continue  # never an entry (`memory_checks.read_entry`), so it holds none
            try:
                data = read_head(path)
            except OSError:
                unread.append(path)
                continue
            for fact_id in ids_held(data, path.name) & ids:
                found[fact_id].add(path)

    if every:
        check(files.scan())
    else:
        check(_by_name(files, facts))
        if snapshot is not None:
            check(_in_snapshot(files, snapshot, ids))
        check(path for path in hints if path.is_file())
        if any(not paths for paths in found.values()):
            check(files.scan())
    return Located({i: sorted(p) for i, p in found.items() if p}, sorted(set(unread)))


def _by_name(files: MemoryFiles, facts: Sequence[Fact]) -> Iterator[Path]:
    for fact in facts:
        for candidate in (fact, replace(fact, deleted=not fact.deleted)):
            path = files.find(candidate)
            if path is not None:
                yield path


def _in_snapshot(files: MemoryFiles, snapshot: Snapshot, ids: set[str]) -> list[Path]:
    held = snapshot.held
    try:
        rels = [
            rel for rel in snapshot.paths() if (seen := snapshot.get(rel)) and seen.fact_id in ids
        ]
    finally:
        if not held:
            snapshot.release()  # taken in for this lookup only
    paths = [files.root / rel for rel in rels]
    return [path for path in paths if path.is_file() and files.is_entry_path(path)]
