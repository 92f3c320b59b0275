"""The memory files with the snapshot of what the index was built from (embedded mode).

Every file the book writes, moves or removes is noted in the snapshot here, so the
next catch-up (`book.reindex`) knows which files changed behind memlane's back, and
among the paths the next coalesced commit stages (`book.history`), so git looks at
those files, not at the whole tree.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from memlane.files.memory_checks import MAX_ENTRY_BYTES
from memlane.files.memory_files import SCOPE_FILE, MemoryFiles
from memlane.files.memory_snapshot import Snapshot

log = logging.getLogger("memlane.memory")


@dataclass(frozen=True, slots=True)
class Tree:
    """The files (the truth in embedded mode) and their content-hash snapshot."""

    files: MemoryFiles
    snapshot: Snapshot
    touched: set[str] = field(default_factory=set)
    """Paths (relative to the root) written, moved or removed since `take_touched`."""
    skipped: dict[str, str | None] = field(default_factory=dict)
    """Files a pass skipped (`book.reindex`), each with the id it holds (a duplicate's, a
    broken file's last good one) or None: their removal is still a person's change to
    commit, and a duplicate takes its id over when the file holding it goes."""

    @classmethod
    def open(cls, root: Path, *, read: bool = True, max_bytes: int = MAX_ENTRY_BYTES) -> Tree:
        """`read=False`: the snapshot's file is left unread (`Snapshot.load`). `max_bytes`:
        a bigger entry file is skipped (`memory_checks.max_entry_bytes`)."""
        return cls(MemoryFiles(root, max_bytes=max_bytes), Snapshot.load(root, read=read))

    def remember(self, path: Path, digest: str, fact_id: str) -> None:
        rel = self.files.relative(path)
        self.snapshot.set(rel, digest, fact_id)
        self.touched.add(rel)

    def forget(self, path: Path | None) -> None:
        """A file that moved or went leaves the snapshot (one still on disk stays)."""
        if path is None:
            return
        rel = self.files.relative(path)
        self.touched.add(rel)
        if not path.exists():
            self.snapshot.drop(rel)
            self.skipped.pop(rel, None)  # memlane removed it: no person's change

    def touch_scope(self, scope: str) -> None:
        """A scope written to: its folder's `.scope` file is new the first time."""
        self.touched.add(self.files.relative(self.files.scope_dir(scope) / SCOPE_FILE))

    def take_touched(self) -> set[str]:
        """The paths touched since the last call (under the book's lock)."""
        touched = set(self.touched)
        self.touched.clear()
        return touched

    def save(self, *, release: bool = False) -> None:
        """Write the snapshot; one not saved only makes the next start re-read files.
        `release`: then drop its copy in memory (`Snapshot.release`)."""
        try:
            self.snapshot.save()
        except OSError as exc:
            log.warning("memory snapshot not saved (rebuilt at next start): %s", exc)
        if release:
            self.snapshot.release()
