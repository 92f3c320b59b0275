"""The content-hash snapshot of the memory files the index was built from.

`memory_index.json` (derived, git-ignored) maps each file's path under the
memory root to the hash of its bytes and the entry id. Comparing it with the
files on disk tells what a person created, edited or deleted while memlane was
not looking, so the index can catch up at start without re-reading everything
into the store.

Several processes may keep one home's snapshot (the workers of `serve --workers`,
the CLI beside a proxy), each with its own copy in memory. So `save` writes only
what this process changed since its last save onto the file as it is now
(re-read when another process replaced it), and the caller saves under the
memory lock (`files.locks`). The snapshot stays a hint either way: an entry it
lacks or holds stale makes memlane read that file again, never index it wrong.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memlane.files.atomic import write_atomic

SNAPSHOT_FILE = "memory_index.json"
log = logging.getLogger("memlane.memory.files")


@dataclass(frozen=True, slots=True)
class Seen:
    digest: str
    fact_id: str


Signature = tuple[int, int, int]
"""(inode, size, mtime in ns) of the file: another process replaced it when this changes."""


class Snapshot:
    """Path → (hash, id), kept in memory; `save` merges this process's changes into the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Seen] = {}
        self._changed: dict[str, Seen] = {}
        self._removed: set[str] = set()
        self._signature: Signature | None = None
        self.loaded = False

    @classmethod
    def load(cls, root: Path) -> Snapshot:
        snap = cls(root / SNAPSHOT_FILE)
        entries = snap._read()
        if entries is not None:
            snap._entries = entries
            snap.loaded = True
        return snap

    def _read(self) -> dict[str, Seen] | None:
        """The file's entries (None when there is none or it is unreadable)."""
        try:
            signature = _signature(self.path)
            data = json.loads(self.path.read_text(encoding="utf-8"))
            entries = {
                str(rel): Seen(str(item["hash"]), str(item["id"])) for rel, item in data.items()
            }
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning(
                "memory snapshot %s unreadable (%s): rebuilding it from the files", self.path, exc
            )
            return None
        self._signature = signature
        return entries

    def get(self, rel: str) -> Seen | None:
        return self._entries.get(rel)

    def set(self, rel: str, digest: str, fact_id: str) -> None:
        seen = Seen(digest, fact_id)
        self._entries[rel] = seen
        self._changed[rel] = seen
        self._removed.discard(rel)

    def pop(self, rel: str) -> Seen | None:
        self._changed.pop(rel, None)
        self._removed.add(rel)
        return self._entries.pop(rel, None)

    def paths(self) -> Iterator[str]:
        return iter(list(self._entries))

    def paths_of(self, fact_id: str) -> list[str]:
        return [rel for rel, seen in self._entries.items() if seen.fact_id == fact_id]

    def __len__(self) -> int:
        return len(self._entries)

    def save(self) -> None:
        """Write this process's changes since its last save onto the file as it is now."""
        if self._signature != _signature(self.path):  # another process saved since
            on_disk = self._read()
            if on_disk is not None:
                for rel in self._removed:
                    on_disk.pop(rel, None)
                on_disk.update(self._changed)
                self._entries = on_disk
        entries = sorted(self._entries.items())
        data = {rel: {"hash": seen.digest, "id": seen.fact_id} for rel, seen in entries}
        write_atomic(self.path, json.dumps(data, indent=0, ensure_ascii=False))
        self._changed.clear()
        self._removed.clear()
        self._signature = _signature(self.path)


def _signature(path: Path) -> Signature | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)
