"""The memory files with the snapshot of what the index was built from (embedded mode).

Every file the book writes, moves or removes is noted in the snapshot here, so the
next catch-up (`book.reindex`) knows which files changed behind memlane's back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from memlane.files.memory_files import MemoryFiles
from memlane.files.memory_snapshot import Snapshot

log = logging.getLogger("memlane.memory")


@dataclass(frozen=True, slots=True)
class Tree:
    """The files (the truth in embedded mode) and their content-hash snapshot."""

    files: MemoryFiles
    snapshot: Snapshot

    @classmethod
    def open(cls, root: Path) -> Tree:
        return cls(MemoryFiles(root), Snapshot.load(root))

    def remember(self, path: Path, digest: str, fact_id: str) -> None:
        self.snapshot.set(self.files.relative(path), digest, fact_id)

    def forget(self, path: Path | None) -> None:
        """A file that moved or went leaves the snapshot (one still on disk stays)."""
        if path is None or path.exists():
            return
        self.snapshot.pop(self.files.relative(path))

    def save(self) -> None:
        """Write the snapshot; one not saved only makes the next start re-read files."""
        try:
            self.snapshot.save()
        except OSError as exc:
            log.warning("memory snapshot not saved (rebuilt at next start): %s", exc)
