"""The memory book: writes entries to their source of truth and keeps the index in step.

Embedded mode (SQLite): the Markdown files are the truth. Every change is
written to its file first (atomically), then to the store's index (keyword
terms and, through `embed_missing`, vectors), and the content-hash snapshot is
updated; `sync_files` rebuilds or catches the index up from the files (start,
`memlane memory reindex`, the watcher). PostgreSQL mode: the database is the
truth, `files` is None and every file step is skipped (`memlane memory export`
writes the tree on demand). One code path either way.

One book per runtime (`Runtime.memory_book`); writes are serialised by one lock, so the
files, the snapshot and the index never disagree. Other processes may write the same
home (the workers of `serve --workers`, the CLI beside a proxy): in embedded mode every
write, catch-up and re-index also holds the home's memory lock (`files.locks`), the
snapshot merges what each process changed, and a file whose entry the index already
holds as it is counts as unchanged, whoever wrote it. Only the primary process
(`Runtime.primary`) catches the index up with the files at start and watches them.

The parts, one concern each:

- `core`: `MemoryBook`, the locks, the start, and the async calls the rest of memlane makes;
- `tree`: the files with their snapshot (embedded mode);
- `writes`: entries to files and index, and the group commit of waiting writes;
- `reindex`: files to index (the catch-up at start, a rebuild, one file at a time);
- `hand_edits`: a person's changes while memlane runs (the watcher's, and before a commit);
- `history`: the memory repository's commits, coalesced.
"""

from memlane.engine.memory.book.core import MemoryBook
from memlane.engine.memory.book.reindex import SyncReport

__all__ = ["MemoryBook", "SyncReport"]
