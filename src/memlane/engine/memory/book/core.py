"""`MemoryBook`: the one writer of a home's memory, and what the rest of memlane calls.

It holds the locks (one writer of files, snapshot and index at a time, in this process
and across them), catches the index up once at start, and hands the work to its parts:
writes to `writes` (grouped while they wait), re-indexing to `reindex`, a person's
changes while it runs to `hand_edits`, commits to `history`. The package's docstring
says how the files, the snapshot and the index stay in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from memlane.engine import threads
from memlane.engine.background import Background
from memlane.engine.memory.book import entry_files, hand_edits, reindex, writes
from memlane.engine.memory.book.hand_edits import HandChanges
from memlane.engine.memory.book.history import CommitQueue
from memlane.engine.memory.book.reindex import SyncReport
from memlane.engine.memory.book.tree import Tree
from memlane.engine.memory.vectors import Progress, VectorsRuntime, embed_missing
from memlane.engine.threads import background_context
from memlane.files.git import GitError, GitRepo
from memlane.files.locks import MEMORY_LOCK, SCOPE_LOCKS, HomeLock
from memlane.files.memory_checks import max_entry_bytes
from memlane.files.memory_files import MemoryFiles
from memlane.files.watcher import watch
from memlane.store.urls import StoreKind
from memlane.types import Fact

log = logging.getLogger("memlane.memory")

WATCH_START_SECONDS = 5.0


ENTRY_COUNTS_KEPT = 4_096
"""Conversations whose entry count a process remembers (`MemoryBook.entry_counts`)."""


class BookRuntime(VectorsRuntime, Protocol):
    """What the book takes of the runtime that opens it (`engine.runtime.Runtime`), named
    here so the book never imports the runtime back."""

    @property
    def store_kind(self) -> StoreKind: ...

    @property
    def primary(self) -> bool: ...

    @property
    def background(self) -> Background: ...


class MemoryBook:
    """A home's memory entries, written to their truth (files or database) and indexed."""

    def __init__(self, rt: BookRuntime) -> None:
        self.rt = rt
        settings = rt.settings
        root = settings.memory_path
        # SQLite (the default) keeps memories as files; PostgreSQL keeps them in the database.
        # only the primary reads the snapshot (`ready`); the other workers write to it
        embedded = rt.store_kind == "sqlite"
        self.tree: Tree | None = None
        if embedded:
            limit = max_entry_bytes(settings.memory_message_chars)
            self.tree = Tree.open(root, read=rt.primary, max_bytes=limit)
        use_git = self.tree is not None and settings.memory_git and GitRepo.available()
        git = GitRepo(root, home=settings.home_path) if use_git else None
        self.commits = CommitQueue(
            git, rt.background, self._persist_snapshot, take_in=self.take_in_hand_edits
        )
        self._looked_at_ns = 0 if rt.primary else time.time_ns()
        """When the files were last looked at for a person's changes (`take_in_hand_edits`):
        the primary's catch-up at start looks at them all; another process, from its start."""
        self.home_lock = HomeLock(settings.home_path, MEMORY_LOCK)
        """Held (in embedded mode) by whichever process writes the files, the snapshot and
        the index: the workers of one proxy, and the CLI beside it."""
        self._lock: asyncio.Lock | None = None
        self._started: asyncio.Task[SyncReport] | None = None
        self.watch_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._waiting_writes: list[writes.PendingWrite] = []
        self._writer: asyncio.Task[None] | None = None
        self._snapshot_dirty = False
        self.entry_counts: dict[str, int] = {}
        """Entries each conversation is known to hold (`ingest.evict_conversation`): an
        upper bound kept by this process, so a conversation under its limit is not listed
        again after every turn. The latest `ENTRY_COUNTS_KEPT` conversations only
        (`note_entry_count`): one forgotten is listed once more."""

    def note_entry_count(self, conversation_id: str, count: int) -> None:
        """Remember how many entries a conversation holds; past `ENTRY_COUNTS_KEPT`
        conversations, the one noted longest ago is forgotten (a process serves new
        sessions for as long as it runs)."""
        counts = self.entry_counts
        counts.pop(conversation_id, None)
        counts[conversation_id] = count
        while len(counts) > ENTRY_COUNTS_KEPT:
            del counts[next(iter(counts))]

    @property
    def files(self) -> MemoryFiles | None:
        """The memory files (embedded mode); None when the database is the truth."""
        return self.tree.files if self.tree is not None else None

    @property
    def git(self) -> GitRepo | None:
        """The memory repository, when memory is kept under git."""
        return self.commits.git

    # --- locks ----------------------------------------------------------------
    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """The book's lock, and in embedded mode the home's memory lock: one writer of the
        files, the snapshot and the index at a time, in this process and across them."""
        async with self.lock:
            if self.tree is None:
                yield
                return
            async with self.home_lock.hold():
                yield

    @contextlib.asynccontextmanager
    async def scope_lock(self, scope: str) -> AsyncIterator[None]:
        """Held across a reconciliation (read neighbourhood, ask, apply) in one scope, by one
        caller at a time, in this process or another: two would both add a fact neither
        has seen yet. One of the striped lock files (`HomeLock.striped`), whose `hold`
        also queues this event loop's callers: no lock is kept per scope, so a process
        that serves a new conversation scope after another (`memory_fact_scope =
        conversation`) or many namespaces holds a bounded number of locks."""
        async with HomeLock.striped(self.rt.settings.home_path, SCOPE_LOCKS, scope).hold():
            yield

    # --- start -----------------------------------------------------------------
    async def ready(self) -> SyncReport:
        """Catch the index up with the files once per process (edits made while stopped).

        Only the primary process does it (the first worker of `serve --workers`); the others
        write under the memory lock, which the catch-up holds until it is done."""
        if not self.rt.primary:
            return SyncReport()
        started = self._started
        if started is None or (started.done() and started.exception() is not None):
            # a first sync that failed (a locked file, a full disk) is tried again
            started = self._started = asyncio.get_running_loop().create_task(
                self.sync_files(rebuild=False)
            )
        return await asyncio.shield(started)

    # --- writes ------------------------------------------------------------------
    async def write(
        self,
        puts: Sequence[Fact] = (),
        tombstones: writes.Tombstones = (),
        *,
        new: Collection[str] = (),
    ) -> None:
        """Write new or changed entries and tombstone others, then embed what is new.
        `new`: ids of puts just minted (`new_id`), whose files need no looking for.

        Group commit: the write waits with the others (other sessions' batches) for the
        book's one writer (`_write_waiting`), which writes what waits in groups, one thread
        hop each; each caller returns once its own entries are written (or raises what
        they raised). The callers wait for their own write, not for the lock: 200 of them
        queued on it woke one by one through a busy event loop, seconds a group."""
        if not puts and not tombstones:
            return
        loop = asyncio.get_running_loop()
        mine = writes.PendingWrite(puts, tombstones, new, loop.create_future())
        mine.done.add_done_callback(threads.retrieved)  # its caller may have gone
        self._waiting_writes.append(mine)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(
                self._write_waiting(), name="memory-book-writer", context=background_context()
            )
        await asyncio.shield(mine.done)  # a caller cancelled leaves its write to the writer

    async def _write_waiting(self) -> None:
        """The book's writer: while writes wait, a group of them at a time, under the lock
        (in this process and across them)."""
        while self._waiting_writes:
            await threads.let_requests_go_first()  # before the lock: never holding it idle
            async with self.writing():
                group, self._waiting_writes = writes.take_group(self._waiting_writes)
                if not group:
                    continue
                try:
                    outcomes = await threads.to_thread_at_once(
                        writes.write_group, group, self._write_sync
                    )
                    if self.rt.settings.dense_retrieval:
                        await threads.to_thread_at_once(self._embed_missing_sync)
                except BaseException as exc:  # stopped (shutdown), or embedding failed
                    writes.abandon(group, exc)
                    if isinstance(exc, Exception):
                        continue  # its callers were told
                    raise
                writes.settle(group, outcomes)

    def _write_sync(
        self, puts: Sequence[Fact], tombstones: writes.Tombstones, new: Collection[str]
    ) -> None:
        store = self.rt.store
        writes.write_entries(self.tree, store, puts, tombstones, new)
        # The snapshot's changes are appended to its file once per commit, not per write
        # (`files.memory_snapshot`). One lost in a crash only makes the next start re-read
        # those files.
        self._snapshot_dirty = True

    async def adopt(self, facts: Sequence[Fact]) -> None:
        """Before a deliberate write of these entries (`memory edit`, `forget`, ...): each
        one's file, wherever a person put it, moved to where the write looks, and no
        second file left holding its id (`book.entry_files.adopt`)."""
        if self.tree is None or not facts:
            return
        async with self.writing():
            await threads.to_thread(entry_files.adopt, self.tree, facts)
            self._snapshot_dirty = True

    async def purge(self, facts: Sequence[Fact], message: str) -> list[str]:
        """Remove entries entirely and leave no copy of them (`--purge`); returns what
        could not be done (a file left holding one, or one that could not be read, which
        may): empty when nothing of them is left.

        The memory repository's history is rewritten first (`files.git_purge`: without
        every path that ever held them and any text they had, `message` recording it),
        while their files and rows are still in place: a git failure (`GitError`) has
        removed nothing, and the same purge can run again. Every file holding them
        (`book.entry_files.erase`: whatever its name or folder) and their rows then go,
        under the same git lock, so no commit takes the files back; last the store's
        files are cleaned (`Store.purge_deleted`), which only deleted rows allow. A
        `StoreError` from then on leaves the entries removed and their history purged."""
        if not facts:
            return []
        async with self.writing():
            history = self._history()
            if history is None:
                left = await threads.to_thread(entry_files.erase, self.tree, self.rt.store, facts)
            else:
                async with history.purging([f.id for f in facts], [f.text for f in facts], message):
                    left = await threads.to_thread(
                        entry_files.erase, self.tree, self.rt.store, facts
                    )
            self._snapshot_dirty = True
        await threads.to_thread(self.rt.store.purge_deleted)
        return left

    def _history(self) -> GitRepo | None:
        """The repository a purge rewrites: the book's own, or one left by an earlier run
        with git on (`memory_git` off now keeps nothing new in it, yet it still holds what
        it held). A GitError when it exists and git cannot run: nothing is removed then."""
        if self.git is not None or self.tree is None:
            return self.git
        root = self.rt.settings.memory_path
        if not (root / ".git").exists():
            return None
        if not GitRepo.available():
            raise GitError(
                f"git is not installed, and the memory's history in {root / '.git'} still "
                "holds it: install git"
            )
        return GitRepo(root, home=self.rt.settings.home_path)

    def _save_snapshot(self) -> None:
        self._snapshot_dirty = False
        if self.tree is not None:
            self.tree.save()

    async def _persist_snapshot(self) -> Collection[str]:
        """Save the snapshot; returns the paths the book touched since (`history.Persist`)."""
        if self.tree is None or not (self._snapshot_dirty or self.tree.touched):
            return ()
        async with self.writing():  # never while a write changes it, here or elsewhere
            if self._snapshot_dirty:
                await threads.to_thread(self._save_snapshot)
            return self.tree.take_touched()

    def _embed_missing_sync(self, progress: Progress | None = None) -> int:
        return embed_missing(self.rt, progress)

    # --- files → index -------------------------------------------------------------
    async def sync_files(
        self,
        progress: Progress | None = None,
        embed_progress: Progress | None = None,
        *,
        rebuild: bool = True,
    ) -> SyncReport:
        """Bring the index in line with every file. `rebuild` (`memlane memory reindex`):
        every file is compared with its row, so a row that drifted from its file is
        repaired; else (the catch-up at start) only files whose content hash changed are."""
        async with self.writing():
            report = SyncReport()
            if self.tree is not None:
                self._looked_at_ns = time.time_ns()
                report = await threads.to_thread(
                    reindex.sync_tree, self.tree, self.rt.store, progress, rebuild=rebuild
                )
                self._snapshot_dirty = False  # the pass saved it
            report.embedded = await threads.to_thread(self._embed_missing_sync, embed_progress)
        return report

    async def apply_file_changes(self, paths: Iterable[Path]) -> HandChanges:
        """Re-index files a person created, edited or deleted; returns what a person
        changed (memlane's own writes among `paths` change nothing)."""
        if self.tree is None:
            return HandChanges()
        async with self.writing():
            changes = await threads.to_thread(
                hand_edits.apply_changes, self.tree, self.rt.store, sorted(set(paths))
            )
            self._snapshot_dirty = False  # the pass saved it
            if changes:
                await threads.to_thread(self._embed_missing_sync)
        return changes

    async def on_files_changed(self, paths: set[Path]) -> int:
        """What the watcher calls: re-index, then one commit for the batch; returns how
        many files a person changed."""
        changes = await self.apply_file_changes(paths)
        if changes:
            await self.commit(changes.message())
        return len(changes)

    async def take_in_hand_edits(self) -> HandChanges:
        """Before a commit of the whole tree (a sweep, a person's command): take in the
        files a person changed since the last look, so each is redacted before git takes
        it, whether a watcher saw it or not (`hand_edits.take_in`)."""
        if self.tree is None:
            return HandChanges()
        async with self.writing():
            since, self._looked_at_ns = self._looked_at_ns, time.time_ns()
            changes = await threads.to_thread(hand_edits.take_in, self.tree, self.rt.store, since)
            if changes:
                await threads.to_thread(self._embed_missing_sync)
        return changes

    # --- watching --------------------------------------------------------------------
    async def start_watching(self, *, force_polling: bool | None = None) -> None:
        """Follow hand edits while running; returns once the watch is in place."""
        if self.files is None or self.watch_task is not None:
            return
        self._stop = asyncio.Event()
        ready = asyncio.Event()
        self.watch_task = self.rt.background.start_service(
            watch(
                self.files.entries,
                self.on_files_changed,
                stop=self._stop,
                ready=ready,
                force_polling=force_polling,
            ),
            name="memory-watcher",
        )
        waiter = asyncio.ensure_future(ready.wait())
        await asyncio.wait(
            {waiter, self.watch_task},
            timeout=WATCH_START_SECONDS,
            return_when=asyncio.FIRST_COMPLETED,
        )
        waiter.cancel()
        if self.watch_task.done() and self.watch_task.exception() is not None:
            log.warning("memory watcher did not start: %s", self.watch_task.exception())
            self.watch_task = None

    async def stop_watching(self) -> None:
        task, self.watch_task = self.watch_task, None
        if task is None:
            return
        self._stop.set()
        try:
            async with asyncio.timeout(WATCH_START_SECONDS):
                await task
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()

    # --- history (`book.history`) ------------------------------------------------------
    async def commit(self, message: str) -> bool:
        """Commit now (a person's deliberate change: `memory add`, `edit`, `forget`)."""
        return await self.commits.commit(message)

    def commit_later(self, message: str) -> None:
        """Queue a background change for the next coalesced commit (`history.CommitQueue`);
        the file snapshot is saved then too (also without git)."""
        self.commits.later(message)

    async def flush(self, *, sweep: bool = False) -> bool:
        """Commit every queued change now, as one commit; False when none was waiting.
        `sweep`: stage the whole tree, not only the paths the book touched."""
        return await self.commits.flush(sweep=sweep)
