"""The content-hash snapshot of the memory files the index was built from.

`memory_index.json` (derived, git-ignored) maps each file's path under the
memory root to the hash of its bytes and the entry id. Comparing it with the
files on disk tells what a person created, edited or deleted while memlane was
not looking, so the index can catch up at start without re-reading everything
into the store.

A busy proxy changes a few entries per turn in a memory of tens of thousands, so
the file is a journal: its first line is the whole snapshot (a JSON object, path
→ hash and id), each later line one save's changes (path → hash and id, or null
for a path that went). `save` appends what changed since the last save, a cost
that follows the change, not the memory; once the appended changes outnumber the
entries, it writes the whole snapshot again as one line (atomically), so reading
stays proportional to the memory too. A file of one JSON object (the layout before
the journal) reads as a snapshot with nothing appended.

Several processes may keep one home's snapshot (the workers of `serve --workers`,
the CLI beside a proxy), each with its own copy in memory, and save under the memory
lock (`files.locks`). Appends never overwrite another process's changes; before its
own, a save reads what others appended since (or the whole file, when another
process rewrote it). The snapshot stays a hint either way: an entry it lacks or holds
stale (a line torn by a crash is skipped, and the next save writes the file whole)
makes memlane read that file again, never index it wrong.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.files.atomic import write_atomic

SNAPSHOT_FILE = "memory_index.json"
WHOLE_CHUNK = 1024
"""Entries a whole rewrite turns into JSON at a time."""
REWRITE_AT_LEAST = 1024
"""Changes appended before the snapshot is written whole again, at the least: with
few entries, rewriting after every few changes would cost more than it saves."""
log = logging.getLogger("memlane.memory.files")


@dataclass(frozen=True, slots=True)
class Seen:
    digest: str
    fact_id: str


Changes = dict[str, Seen | None]
"""Path → what it holds now, or None for a path that went."""

Packed = bytes | Seen
"""What the copy in memory keeps of an entry: its hash's 32 bytes followed by its id's,
one bytes object (118 B an entry against 263 for a `Seen` with its two strings: a busy
proxy keeps two entries a turn for good); a `Seen` whose hash is not a lower-case
SHA-256 hex digest (an edited snapshot) stays as it is."""
Entries = dict[str, Packed]


def _pack(seen: Seen) -> Packed:
    digest = seen.digest
    if len(digest) != 64:
        return seen
    try:
        raw = bytes.fromhex(digest)
    except ValueError:
        return seen
    return raw + seen.fact_id.encode() if raw.hex() == digest else seen


def _unpack(packed: Packed) -> Seen:
    if isinstance(packed, Seen):
        return packed
    return Seen(packed[:32].hex(), packed[32:].decode())


@dataclass(frozen=True, slots=True)
class _Position:
    """Where this process's copy stands in the file: which file (its inode) and how many
    of its bytes it has taken in."""

    inode: int
    offset: int


class SnapshotUnreadable(ValueError):
    pass


class Snapshot:
    """Path → (hash, id); `save` appends this process's changes to the file.

    The copy in memory is held only while something reads it. A proxy reads the
    snapshot at start (the catch-up, `book.reindex.sync_tree`, which `release`s it) and
    when a person's edits come in (the watcher); otherwise it only writes: two entries a
    turn, appended to the file from `_changed`, the entries a save has not written yet.
    Held for good, it was about 600 B of resident memory a remembered turn. A read
    (`get`, `pop`, `paths`, `paths_of`, `len`) takes the file in again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: Entries | None = {}
        """The whole snapshot, with this process's changes on top; None: not held."""
        self._changed: Changes = {}
        self._position: _Position | None = None
        self._appended = 0
        """Changes the file holds after its first line (what a rewrite would fold in)."""
        self._count = 0
        """Entries when the copy was last released (what a rewrite would write)."""
        self._rewrite = True
        """The next save writes the file whole (none yet, an older layout, a torn line)."""
        self.loaded = False

    @classmethod
    def load(cls, root: Path, *, read: bool = True) -> Snapshot:
        """The snapshot of the memory at `root`. `read=False` leaves its file unread, the
        copy released: for a process that only writes it (a worker that is not the
        primary), whose appends need nothing of it."""
        snap = cls(root / SNAPSHOT_FILE)
        if not read:
            snap._entries, snap._rewrite = None, False
        elif snap._read_whole():
            snap.loaded = True
        return snap

    @property
    def held(self) -> bool:
        return self._entries is not None

    def release(self) -> None:
        """Drop the copy in memory; the changes not saved yet stay, and are saved."""
        if self._entries is not None:
            self._count = len(self._entries)
            self._entries = None
            self._position = None

    def get(self, rel: str) -> Seen | None:
        packed = self._held().get(rel)
        return None if packed is None else _unpack(packed)

    def set(self, rel: str, digest: str, fact_id: str) -> None:
        seen = Seen(digest, fact_id)
        if self._entries is not None:
            self._entries[rel] = _pack(seen)
        self._changed[rel] = seen

    def drop(self, rel: str) -> None:
        """`pop` without reading what `rel` held: no need to take the file in."""
        if self._entries is not None:
            self._entries.pop(rel, None)
        self._changed[rel] = None

    def pop(self, rel: str) -> Seen | None:
        packed = self._held().pop(rel, None)
        self._changed[rel] = None
        return None if packed is None else _unpack(packed)

    def paths(self) -> Iterator[str]:
        return iter(list(self._held()))

    def paths_of(self, fact_id: str) -> list[str]:
        tail = fact_id.encode()  # a packed entry ends with its id: no entry unpacked
        return [
            rel
            for rel, packed in self._held().items()
            if (packed[32:] == tail if isinstance(packed, bytes) else packed.fact_id == fact_id)
        ]

    def __len__(self) -> int:
        return len(self._held())

    def save(self) -> None:
        """Append this process's changes since its last save to the file (after taking in
        what other processes saved meanwhile), or write it whole when it is due.

        Not held, the copy is taken in only to write the file whole: when it is due,
        or when the file went."""
        if self._entries is not None:
            self._save_held()
            return
        if not self._changed and not self._rewrite:
            return
        if not self._due(self._count) and self._appended_alone():
            return
        self._held()
        try:
            self._save_held()
        finally:  # what failed to be written stays in `_changed` for the next save
            self.release()

    def _save_held(self) -> None:
        self._catch_up()
        if not self._changed and not self._rewrite:
            return
        if self._due(len(self._held())):
            self._write_whole()
        else:
            self._append(self._changed)
        self._changed = {}

    def _due(self, entries: int) -> bool:
        """Whether the next save writes the file whole: it must be (none yet, an older
        layout, a torn line), or its appended changes would outnumber its `entries`."""
        return self._rewrite or self._appended + len(self._changed) > max(entries, REWRITE_AT_LEAST)

    def _appended_alone(self) -> bool:
        """Append the changes without the copy; False when the file went (then it is
        written whole, from what the copy holds)."""
        try:
            self._append(self._changed)
        except FileNotFoundError:
            return False
        self._changed = {}
        return True

    def _held(self) -> Entries:
        """The copy in memory, taken in from the file (with this process's changes on
        top) when it is not held."""
        if self._entries is None:
            self._entries = {}
            if not self._read_whole():
                self._rewrite = True
            _apply(self._entries, self._changed)
        return self._entries

    # --- the file ----------------------------------------------------------------------
    def _catch_up(self) -> None:
        """Take in what other processes saved since this one last read or wrote the file,
        keeping this process's own unsaved changes on top."""
        try:
            stat = os.stat(self.path)
        except OSError:
            self._rewrite = True  # gone: written whole from what this process holds
            return
        at = self._position
        if at is not None and at.inode == stat.st_ino and at.offset == stat.st_size:
            return  # nobody saved since
        mine = self._changed
        if at is not None and at.inode == stat.st_ino and at.offset < stat.st_size:
            self._read_tail(at)
        else:  # another process wrote it whole: read it all again
            self._read_whole()
        _apply(self._held(), mine)
        self._changed = mine

    def _read_whole(self) -> bool:
        """Replace this copy with the file's; False when there is none or it is unreadable."""
        try:
            with open(self.path, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                data = handle.read()
            entries, appended, complete = _parse(data)
        except FileNotFoundError:
            return False
        except (OSError, SnapshotUnreadable) as exc:
            log.warning(
                "memory snapshot %s unreadable (%s): rebuilding it from the files", self.path, exc
            )
            self._rewrite = True
            return False
        self._entries, self._appended = entries, appended
        self._position = _Position(inode, len(data))
        self._rewrite = not complete
        return True

    def _read_tail(self, at: _Position) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(at.offset)
                data = handle.read()
        except OSError as exc:
            log.warning("memory snapshot %s not re-read (%s)", self.path, exc)
            self._rewrite = True
            return
        *lines, torn = data.split(b"\n")  # a line is whole once its newline is written
        complete = not torn
        for line in lines:
            try:
                changes = _changes(json.loads(line))
            except (ValueError, SnapshotUnreadable):
                complete = False  # torn by a crash: skipped
                continue
            _apply(self._held(), changes)
            self._appended += len(changes)
        self._position = _Position(at.inode, at.offset + len(data))
        self._rewrite = self._rewrite or not complete

    def _write_whole(self) -> None:
        """The snapshot as one JSON line, written `WHOLE_CHUNK` entries at a time: built
        whole it took about 850 B an entry at once (68 MB at 80,000 entries), a burst in
        the proxy's resident memory at every rewrite."""
        size = write_atomic(self.path, _whole(self._held()))
        self._position = _Position(os.stat(self.path).st_ino, size)
        self._appended = 0
        self._rewrite = False

    def _append(self, changes: Changes) -> None:
        items = {rel: _item(seen) if seen else None for rel, seen in changes.items()}
        line = (json.dumps(items, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        descriptor = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            found = os.fstat(descriptor)
            inode = found.st_ino
            if found.st_size and os.pread(descriptor, 1, found.st_size - 1) != b"\n":
                line = b"\n" + line  # after a line a crash tore: this one stays whole
            os.write(descriptor, line)
            size = os.fstat(descriptor).st_size
        finally:
            os.close(descriptor)
        self._position = _Position(inode, size)
        self._appended += len(changes)


def _parse(data: bytes) -> tuple[Entries, int, bool]:
    """The entries a snapshot file holds, how many changes follow its first line, and
    whether it is whole in the journal layout (False: rewrite it at the next save)."""
    try:
        whole = json.loads(data)  # one JSON object: a snapshot just rewritten, or the old layout
    except ValueError:
        pass
    else:
        return _base(whole), 0, data.endswith(b"\n") and data.count(b"\n") == 1
    first, _, rest = data.partition(b"\n")
    try:
        entries = _base(json.loads(first))
    except ValueError as exc:
        raise SnapshotUnreadable(str(exc)) from None
    appended = 0
    complete = data.endswith(b"\n")
    for line in rest.split(b"\n"):
        if not line:
            continue
        try:
            changes = _changes(json.loads(line))
        except (ValueError, SnapshotUnreadable):
            complete = False  # torn by a crash: skipped
            continue
        _apply(entries, changes)
        appended += len(changes)
    return entries, appended, complete


def _base(data: Any) -> Entries:
    changes = _changes(data)
    if any(seen is None for seen in changes.values()):
        raise SnapshotUnreadable("a removal in the snapshot's first line")
    return {rel: _pack(seen) for rel, seen in changes.items() if seen is not None}


def _changes(data: Any) -> Changes:
    if not isinstance(data, dict):
        raise SnapshotUnreadable(f"expected an object, found {type(data).__name__}")
    try:
        return {
            str(rel): None if item is None else Seen(str(item["hash"]), str(item["id"]))
            for rel, item in data.items()
        }
    except (TypeError, KeyError) as exc:
        raise SnapshotUnreadable(f"malformed entry: {exc!r}") from None


def _apply(entries: Entries, changes: Mapping[str, Seen | None]) -> None:
    for rel, seen in changes.items():
        if seen is None:
            entries.pop(rel, None)
        else:
            entries[rel] = _pack(seen)


def _whole(entries: Entries) -> Iterator[bytes]:
    """`entries` as the JSON object `json.dumps` writes (paths sorted, no spaces) and a
    newline, in chunks of `WHOLE_CHUNK` entries."""
    rels = sorted(entries)
    yield b"{"
    for start in range(0, len(rels), WHOLE_CHUNK):
        part = ",".join(
            _dumps(rel) + ":" + _dumps(_item(_unpack(entries[rel])))
            for rel in rels[start : start + WHOLE_CHUNK]
        )
        yield (("," if start else "") + part).encode()
    yield b"}\n"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _item(seen: Seen) -> dict[str, str]:
    return {"hash": seen.digest, "id": seen.fact_id}
