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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from memlane.engine import threads, turnlog
from memlane.engine.memory.vectors import Progress, embed_missing
from memlane.engine.runtime import Runtime
from memlane.files.git import GitRepo, commit_quietly
from memlane.files.locks import MEMORY_LOCK, SCOPE_LOCKS, HomeLock
from memlane.files.memory_files import MemoryFileError, MemoryFiles, id_from_name, now_utc
from memlane.files.memory_snapshot import Snapshot
from memlane.files.watcher import watch
from memlane.store import Store
from memlane.text.redact import redact
from memlane.types import Fact

log = logging.getLogger("memlane.memory")

COMMIT_QUIET_SECONDS = 5.0
"""Per-turn changes are committed together once no new change came for this long..."""
COMMIT_MAX_PENDING = 100
"""...or once this many are waiting: git runs once per burst, never once per turn."""
WATCH_START_SECONDS = 5.0
GROUP_ENTRIES = 256
"""The most entries one group of waiting writes puts in one thread hop."""


@dataclass
class SyncReport:
    """What a files → index pass did."""

    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)
    embedded: int = 0


class MemoryBook:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        settings = rt.settings
        root = settings.memory_path
        # SQLite (the default) keeps memories as files; PostgreSQL keeps them in the database.
        files_are_truth = rt.store_kind == "sqlite"
        self.files: MemoryFiles | None = MemoryFiles(root) if files_are_truth else None
        self.snapshot: Snapshot | None = Snapshot.load(root) if self.files else None
        use_git = self.files is not None and settings.memory_git and GitRepo.available()
        self.git: GitRepo | None = GitRepo(root, home=settings.home_path) if use_git else None
        self.home_lock = HomeLock(settings.home_path, MEMORY_LOCK)
        """Held (in embedded mode) by whichever process writes the files, the snapshot and
        the index: the workers of one proxy, and the CLI beside it."""
        self._lock: asyncio.Lock | None = None
        self._scope_locks: dict[str, asyncio.Lock] = {}
        self._started: asyncio.Task[SyncReport] | None = None
        self.watch_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._pending_commits: list[str] = []
        self._waiting_writes: list[_Write] = []
        self._commit_timer: asyncio.TimerHandle | None = None
        self._snapshot_dirty = False
        self.entry_counts: dict[str, int] = {}
        """Entries each conversation is known to hold (`ingest.evict_conversation`): an
        upper bound kept by this process, so a conversation under its limit is not listed
        again after every turn."""

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
            if self.files is None:
                yield
                return
            async with self.home_lock.hold():
                yield

    @contextlib.asynccontextmanager
    async def scope_lock(self, scope: str) -> AsyncIterator[None]:
        """Held across a reconciliation (read neighbourhood, ask, apply) in one scope, by one
        process at a time: two would both add a fact neither has seen yet."""
        across = HomeLock.striped(self.rt.settings.home_path, SCOPE_LOCKS, scope)
        async with self._scope_locks.setdefault(scope, asyncio.Lock()), across.hold():
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
            started = self._started = asyncio.get_running_loop().create_task(self.sync_files())
        return await asyncio.shield(started)

    # --- writes ------------------------------------------------------------------
    async def write(
        self,
        puts: Sequence[Fact] = (),
        tombstones: Sequence[tuple[Fact, str | None]] = (),
        *,
        new: Collection[str] = (),
    ) -> None:
        """Write new or changed entries and tombstone others, then embed what is new.
        `new`: ids of puts just minted (`new_id`), whose files need no looking for.

        Group commit: writes that wait for the book's lock meanwhile (other sessions'
        batches) are written with this one, in one thread hop, and each caller returns
        once its own entries are written (or raises what they raised)."""
        if not puts and not tombstones:
            return
        mine = _Write(puts, tombstones, new, asyncio.get_running_loop().create_future())
        self._waiting_writes.append(mine)
        async with self.writing():
            if not mine.done.done():  # nobody took it with theirs
                group = self._take_group(mine)
                try:
                    outcomes = await threads.to_thread(self._write_group, group)
                    if self.rt.settings.dense_retrieval:
                        await threads.to_thread(self._embed_missing_sync)
                except BaseException as exc:  # cancelled (shutdown): the others are told
                    for each in group:
                        if each is not mine and not each.done.done():
                            each.done.set_exception(
                                RuntimeError(f"memory write not confirmed: {exc!r}")
                            )
                    raise
                for each, failure in zip(group, outcomes, strict=True):
                    if failure is None:
                        each.done.set_result(None)
                    else:
                        each.done.set_exception(failure)
        await mine.done

    def _take_group(self, mine: _Write) -> list[_Write]:
        """This caller's write and those waiting, oldest first, up to `GROUP_ENTRIES`
        entries (at least its own): one thread hop stays short; the rest wait for the
        next holder of the lock."""
        waiting = [w for w in self._waiting_writes if not w.done.done() and w is not mine]
        group, size = [mine], len(mine.puts) + len(mine.tombstones)
        for each in waiting:
            size += len(each.puts) + len(each.tombstones)
            if size > GROUP_ENTRIES:
                break
            group.append(each)
        self._waiting_writes = [w for w in waiting if w not in group]
        return group

    def _write_group(self, group: Sequence[_Write]) -> list[BaseException | None]:
        """Every waiting write; one that fails is retried alone, so only its caller sees
        the failure."""
        puts = [fact for w in group for fact in w.puts]
        tombstones = [pair for w in group for pair in w.tombstones]
        new = {fact_id for w in group for fact_id in w.new}
        if len(group) == 1:
            try:
                self._write_sync(puts, tombstones, new)
            except Exception as exc:
                return [exc]
            return [None]
        try:
            self._write_sync(puts, tombstones, new)
        except Exception:
            return [self._write_group([w])[0] for w in group]
        return [None] * len(group)

    def _write_sync(
        self,
        puts: Sequence[Fact],
        tombstones: Sequence[tuple[Fact, str | None]],
        new: Collection[str] = (),
    ) -> None:
        store = self.rt.store
        counts = write_counts(store, puts, tombstones)
        folders: set[Path] = set()
        for fact in puts:
            # whatever a memory came from, a credential in it is never kept (file, git, index)
            fact = replace(fact, text=redact(fact.text))
            if self.files is not None:
                fresh = fact.id in new
                old = None if fresh else self.files.find(fact)
                written = self.files.write(fact, new=fresh, folders=folders)
                self._forget_path(old)
                self._remember(written.path, written.digest, fact.id)
            store.put_fact(fact)
        MemoryFiles.sync_folders(folders)
        for fact, replaced_by in tombstones:
            # deleted means no longer true: from the moment given (a message's), else now
            fact = replace(fact, valid_to=fact.valid_to or max(now_utc(), fact.since))
            deleted_at = None
            if self.files is not None:
                old = self.files.find(replace(fact, deleted=False))
                written = self.files.move_to_deleted(fact, replaced_by=replaced_by)
                self._forget_path(old)
                self._remember(written.path, written.digest, fact.id)
                deleted_at = written.fact.updated_at  # the file and the index say the same
            store.delete_fact(
                fact.id, replaced_by=replaced_by, at=fact.valid_to, updated_at=deleted_at
            )
        # The snapshot (every file's digest) is rewritten whole: once per commit, not per
        # write. One lost in a crash only makes the next start re-read those files.
        self._snapshot_dirty = True
        turnlog.count(store, counts)

    async def erase(self, facts: Sequence[Fact]) -> None:
        """Remove entries entirely (`--purge`): their files, active or deleted, and rows."""
        if facts:
            async with self.lock:
                await threads.to_thread(self._erase_sync, facts)

    def _erase_sync(self, facts: Sequence[Fact]) -> None:
        for fact in facts:
            if self.files is not None:
                for candidate in (fact, replace(fact, deleted=not fact.deleted)):
                    path = self.files.find(candidate)
                    if path is not None:
                        self.files.remove(path)
                        self._forget_path(path)
            self.rt.store.purge_fact(fact.id)
        self._snapshot_dirty = True

    async def purge_history(self, facts: Sequence[Fact]) -> None:
        """Leave no copy of erased entries: the memory repository's history is rewritten
        without their files and texts (`files.git_purge`), and the store's files are
        cleaned (`Store.purge_deleted`). Commit the erasure first."""
        if self.git is not None:
            await self.git.purge([f.id for f in facts], [f.text for f in facts])
        await threads.to_thread(self.rt.store.purge_deleted)

    def _remember(self, path: Path, digest: str, fact_id: str) -> None:
        if self.files is not None and self.snapshot is not None:
            self.snapshot.set(self.files.relative(path), digest, fact_id)

    def _forget_path(self, path: Path | None) -> None:
        if path is None or path.exists() or self.files is None or self.snapshot is None:
            return
        self.snapshot.pop(self.files.relative(path))

    def _save_snapshot(self) -> None:
        self._snapshot_dirty = False
        if self.snapshot is not None:
            try:
                self.snapshot.save()
            except OSError as exc:
                log.warning("memory snapshot not saved (rebuilt at next start): %s", exc)

    # --- vectors -----------------------------------------------------------------
    def _embed_missing_sync(self, progress: Progress | None = None) -> int:
        return embed_missing(self.rt, progress)

    # --- files → index -------------------------------------------------------------
    async def sync_files(
        self, progress: Progress | None = None, embed_progress: Progress | None = None
    ) -> SyncReport:
        """Bring the index in line with the files (everything, content-hash checked)."""
        async with self.writing():
            report = SyncReport()
            if self.files is not None:
                report = await threads.to_thread(self._sync_sync, progress)
            report.embedded = await threads.to_thread(self._embed_missing_sync, embed_progress)
        return report

    def _sync_sync(self, progress: Progress | None) -> SyncReport:
        assert self.files is not None
        assert self.snapshot is not None
        files, snapshot, store = self.files, self.snapshot, self.rt.store
        report = SyncReport()
        paths = list(files.scan())
        known = {f.id for f in store.list_facts(include_deleted=True)}
        present: set[str] = set()
        on_disk: set[str] = set()
        for number, path in enumerate(paths, start=1):
            rel = files.relative(path)
            on_disk.add(rel)
            report.scanned += 1
            outcome = self._index_path(path, rel, present, known)
            if outcome == "indexed":
                report.indexed += 1
            elif outcome == "unchanged":
                report.unchanged += 1
            else:
                report.skipped.append(outcome)
            if progress is not None:
                progress(number, len(paths))
        for rel in list(snapshot.paths()):
            if rel not in on_disk:
                snapshot.pop(rel)
        for fact_id in known - present:
            store.purge_fact(fact_id)
            report.removed += 1
        self._save_snapshot()
        return report

    def _index_path(
        self, path: Path, rel: str, present: set[str], known: set[str] | None = None
    ) -> str:
        """Index one file if it changed; returns "indexed", "unchanged" or why it was skipped.

        `present` collects the ids found on disk; `known` (the ids in the store) guards
        against a snapshot that outlived its database; None trusts the snapshot.
        """
        assert self.files is not None
        assert self.snapshot is not None
        seen = self.snapshot.get(rel)
        try:
            entry = self.files.read(path)
        except MemoryFileError as exc:
            log.warning("memory file skipped: %s", exc)
            if seen is not None:
                present.add(seen.fact_id)  # keep the last good version in the index
            named = id_from_name(path.name)
            if named:
                present.add(named)
            return str(exc)
        fact = entry.fact
        if fact.id in present:
            log.warning(
                "memory file %s skipped: id %s is already used by another file", path, fact.id
            )
            return f"{path}: duplicate id {fact.id}"
        present.add(fact.id)
        indexed = known is None or fact.id in known
        if seen is not None and seen.digest == entry.digest and indexed:
            return "unchanged"
        stored = self.rt.store.get_fact(fact.id) if indexed else None
        if stored is not None and same_entry(stored, fact):  # written by memlane (any process)
            self.snapshot.set(rel, entry.digest, fact.id)
            return "unchanged"
        self.rt.store.put_fact(fact)
        if fact.deleted:
            # a tombstone's file says when it was deleted (valid_to, else its last update)
            ended = fact.valid_to or fact.updated_at
            self.rt.store.delete_fact(
                fact.id, replaced_by=fact.replaced_by, at=ended, updated_at=fact.updated_at
            )
        self.snapshot.set(rel, entry.digest, fact.id)
        return "indexed"

    async def apply_file_changes(self, paths: Iterable[Path]) -> int:
        """Re-index files a person created, edited or deleted; returns how many changed."""
        if self.files is None:
            return 0
        async with self.writing():
            changed = await threads.to_thread(self._changes_sync, sorted(set(paths)))
            if changed:
                await threads.to_thread(self._embed_missing_sync)
        return changed

    def _changes_sync(self, paths: Sequence[Path]) -> int:
        assert self.files is not None
        assert self.snapshot is not None
        files, snapshot, store = self.files, self.snapshot, self.rt.store
        changed = 0
        for path in paths:
            if not files.is_entry_path(path):
                continue
            rel = files.relative(path)
            if path.exists():
                if self._index_path(path, rel, set()) == "indexed":
                    changed += 1
                continue
            seen = snapshot.pop(rel)
            fact_id = seen.fact_id if seen is not None else id_from_name(path.name)
            if fact_id is None or snapshot.paths_of(fact_id):
                continue
            fact = store.get_fact(fact_id)
            if fact is None or files.find(fact) is not None:
                continue  # memlane moved or removed it itself (this process or another)
            store.purge_fact(fact_id)
            changed += 1
        self._save_snapshot()
        return changed

    async def on_files_changed(self, paths: set[Path]) -> int:
        """What the watcher calls: re-index, then one commit for the batch."""
        changed = await self.apply_file_changes(paths)
        if changed and self.files is not None:
            names = sorted(self.files.relative(p) for p in paths if self.files.is_entry_path(p))
            listing = "\n".join(names[:50])
            await self.commit(f"memory: {changed} file(s) edited by hand\n\n{listing}")
        return changed

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

    # --- history -------------------------------------------------------------------
    async def commit(self, message: str) -> bool:
        """Commit now (a person's deliberate change: `memory add`, `edit`, `forget`)."""
        await self._persist_snapshot()
        if self.git is None:
            return False
        return await commit_quietly(self.git, redact(message))

    async def _persist_snapshot(self) -> None:
        if self._snapshot_dirty:
            async with self.writing():  # never while a write changes it, here or elsewhere
                await threads.to_thread(self._save_snapshot)

    def commit_later(self, message: str) -> None:
        """Queue a background change for the next coalesced commit.

        The commit runs once no change came for `COMMIT_QUIET_SECONDS`, or at once when
        `COMMIT_MAX_PENDING` are waiting, and at shutdown (`flush`): a busy proxy runs
        git once per burst instead of once per turn. The file snapshot is saved then too
        (also without git).
        """
        self._pending_commits.append(redact(message))  # messages quote memories
        if self._commit_timer is not None:
            self._commit_timer.cancel()
        loop = asyncio.get_running_loop()
        delay = 0.0 if len(self._pending_commits) >= COMMIT_MAX_PENDING else COMMIT_QUIET_SECONDS
        self._commit_timer = loop.call_later(delay, self._start_flush)

    def _start_flush(self) -> None:
        self._commit_timer = None
        self.rt.background.spawn(self.flush(), name="memory-git-commit")

    async def flush(self) -> bool:
        """Commit every queued change now, as one commit; False when none was waiting."""
        if self._commit_timer is not None:
            self._commit_timer.cancel()
            self._commit_timer = None
        messages, self._pending_commits = self._pending_commits, []
        await self._persist_snapshot()
        if not messages or self.git is None:
            return False
        return await commit_quietly(self.git, combined_message(messages))


@dataclass(frozen=True, slots=True)
class _Write:
    """One caller's entries waiting for the book's lock."""

    puts: Sequence[Fact]
    tombstones: Sequence[tuple[Fact, str | None]]
    new: Collection[str]
    done: asyncio.Future[None]


def same_entry(a: Fact, b: Fact) -> bool:
    """Whether two entries say the same (the store's content hash aside): a file memlane
    wrote and the index holds as it is need not be indexed again."""
    return all(
        getattr(a, f.name) == getattr(b, f.name) for f in fields(Fact) if f.name != "content_hash"
    )


def write_counts(
    store: Store, puts: Sequence[Fact], tombstones: Sequence[tuple[Fact, str | None]]
) -> dict[str, int]:
    """What a write adds to the day's counters: memories added, updated and forgotten, and
    turns remembered (summaries are bookkeeping, not counted)."""
    counts = {
        turnlog.MEMORIES_ADDED: 0,
        turnlog.MEMORIES_UPDATED: 0,
        turnlog.MEMORIES_FORGOTTEN: 0,
        turnlog.TURNS_REMEMBERED: 0,
    }
    for fact in puts:
        if fact.role == "memory":
            known = store.get_fact(fact.id) is not None
            counts[turnlog.MEMORIES_UPDATED if known else turnlog.MEMORIES_ADDED] += 1
        elif fact.role in ("user", "assistant"):
            counts[turnlog.TURNS_REMEMBERED] += 1
    counts[turnlog.MEMORIES_FORGOTTEN] = sum(1 for f, _ in tombstones if f.role == "memory")
    return counts


def combined_message(messages: Sequence[str]) -> str:
    """One commit message for several queued changes: each change's first line, its body
    lines (what was added, what was replaced and when) indented under it."""
    if len(messages) == 1:
        return messages[0]
    parts = []
    for message in messages:
        head, *body = message.splitlines() or [""]
        parts.append("\n".join([f"- {head}", *(f"  {line}" for line in body if line.strip())]))
    return f"memory: {len(messages)} updates\n\n" + "\n".join(parts)
