"""The content-hash snapshot of the memory files the index was built from.

`memory_index.json` (derived, git-ignored) maps each file's path under the
memory root to the hash of its bytes and the entry id. Comparing it with the
files on disk tells what a person created, edited or deleted while memlane was
not looking, so the index can catch up at start without re-reading everything
into the store.
"""

from __future__ import annotations

import json
import logging
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


class Snapshot:
    """Path → (hash, id), kept in memory and saved atomically after each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Seen] = {}
        self.loaded = False

    @classmethod
    def load(cls, root: Path) -> Snapshot:
        snap = cls(root / SNAPSHOT_FILE)
        try:
            data = json.loads(snap.path.read_text(encoding="utf-8"))
            snap._entries = {
                str(rel): Seen(str(item["hash"]), str(item["id"])) for rel, item in data.items()
            }
            snap.loaded = True
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning(
                "memory snapshot %s unreadable (%s): rebuilding it from the files", snap.path, exc
            )
        return snap

    def get(self, rel: str) -> Seen | None:
        return self._entries.get(rel)

    def set(self, rel: str, digest: str, fact_id: str) -> None:
        self._entries[rel] = Seen(digest, fact_id)

    def pop(self, rel: str) -> Seen | None:
        return self._entries.pop(rel, None)

    def paths(self) -> Iterator[str]:
        return iter(list(self._entries))

    def paths_of(self, fact_id: str) -> list[str]:
        return [rel for rel, seen in self._entries.items() if seen.fact_id == fact_id]

    def __len__(self) -> int:
        return len(self._entries)

    def save(self) -> None:
        entries = sorted(self._entries.items())
        data = {rel: {"hash": seen.digest, "id": seen.fact_id} for rel, seen in entries}
        write_atomic(self.path, json.dumps(data, indent=0, ensure_ascii=False))
