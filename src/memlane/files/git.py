"""Version the memory files with git: one commit per update, never in front of a response.

The memory root is a plain git repository, so `git log`, `git diff` and
`git revert` work on what memlane remembers. Derived files (the content-hash
snapshot, temporary files) are ignored. Every call runs `git` as a subprocess from a
worker thread (`_run_bytes` says why not from the event loop), serialised by a lock
so two updates never race on the index (with a home given, the home's git lock: the
workers of one proxy and the CLI commit one at a time; a commit may then carry files
another process wrote, whose own commit finds nothing left to do); a failure (no git,
a broken repository) is logged and the memory keeps working without history. A
commit stages every memory file (`MEMORY_PATHS`, never a person's other files), or
only the paths given (what the memory book wrote, moved or removed since its last
commit): git's work then follows the change, not the number of memory files, and
those go in as one `fast-import` stream (`files.git_import`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from memlane.files import git_import
from memlane.files.atomic import write_atomic
from memlane.files.git_purge import PurgeError, PurgeReport, purge_history
from memlane.files.locks import GIT_LOCK, HomeLock
from memlane.files.memory_files import ENTRIES
from memlane.files.memory_snapshot import SNAPSHOT_FILE

log = logging.getLogger("memlane.memory.git")

GITIGNORE = f"""# derived by memlane; rebuilt from the Markdown files
/{SNAPSHOT_FILE}
.*.tmp
"""
MEMORY_PATHS = (ENTRIES, ".gitignore")
"""What memlane commits of the memory folder: the entries and its ignore file. A person's
other files there (notes, scripts) are theirs to commit, or not: a whole-tree commit
carried an untracked `notes.txt`, a key in it, under memlane's message."""
_IDENTITY = ("-c", "user.name=memlane", "-c", "user.email=memlane@localhost")
_QUIET = ("-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null")


class GitError(Exception):
    pass


DETACHED = (
    "the memory repository {root} is on a detached HEAD (a commit, not a branch): memlane "
    "does not commit there, where checking a branch out again would hide its commits and "
    "the memories in them; check a branch out (`git -C {root} switch <branch>`) and the "
    "next commit takes every change in"
)
"""Why nothing is committed on a detached HEAD; the files stay as they are meanwhile."""


def commit_now(root: Path, message: str, *, home: Path | None = None) -> bool:
    """Commit every memory file under an existing repository at `root` now, synchronously.

    For deletions: what was deleted must leave the working tree at once, not wait for
    (or be swept into) the next unrelated commit. False when there is no repository,
    nothing changed, or git failed (logged). With `home`, under the home's git lock.
    """
    if not (root / ".git").exists() or not GitRepo.available():
        return False
    if git_import.detached(root):
        log.warning("memory not versioned this time: %s", DETACHED.format(root=root))
        return False
    if home is not None:
        with HomeLock(home, GIT_LOCK).held():
            return _commit_now(root, message)
    return _commit_now(root, message)


def _staging(root: Path) -> list[tuple[str, ...]]:
    """The git commands that stage every change to `MEMORY_PATHS` under `root`, and nothing
    else: `add` the paths that are there, and take those gone out of the index (`add`
    refuses a path that matches nothing)."""
    there = [path for path in MEMORY_PATHS if (root / path).exists()]
    gone = [path for path in MEMORY_PATHS if path not in there]
    commands: list[tuple[str, ...]] = []
    if there:
        commands.append(("add", "-A", "--", *there))
    if gone:
        commands.append(("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *gone))
    return commands


def _env() -> dict[str, str]:
    """git's environment: never a prompt for credentials, no system-wide configuration."""
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


def _commit_now(root: Path, message: str) -> bool:
    env = _env()

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False
        )

    for args in _staging(root):
        git(*args)
    if git("diff", "--cached", "--quiet").returncode == 0:
        return False
    done = git(
        *_IDENTITY, *_QUIET, "commit", "-q", "--no-verify", "-m", git_import.commit_message(message)
    )
    if done.returncode != 0:
        log.warning("memory deletion not committed: %s", done.stderr.strip()[:300])
        return False
    return True


@dataclass(frozen=True, slots=True)
class LogEntry:
    commit: str
    date: str
    message: str


@dataclass(frozen=True, slots=True)
class Change:
    """One commit that touched a file, with that file's diff in it."""

    commit: str
    date: str
    message: str
    diff: str


class GitRepo:
    """The memory root as a git repository."""

    def __init__(self, root: Path, *, home: Path | None = None) -> None:
        self.root = root
        self.home_lock = HomeLock(home, GIT_LOCK) if home is not None else None
        self._lock: asyncio.Lock | None = None
        self._ready = False
        self._format: str | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("git") is not None

    async def ensure(self) -> None:
        """Create the repository and its `.gitignore` on first use."""
        if self._ready:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.root / ".git").exists():
            await self._git("init", "-q")
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            write_atomic(ignore, GITIGNORE)
        self._ready = True

    async def commit(self, message: str, paths: Collection[str] | None = None) -> bool:
        """Stage every memory file (`MEMORY_PATHS`), or only `paths` (relative to the root:
        files written, moved or removed), and commit; False when nothing changed."""
        message = git_import.commit_message(message)
        async with self._held():
            return await self._commit(message, paths)

    async def _commit(self, message: str, paths: Collection[str] | None) -> bool:
        await self.ensure()
        if git_import.detached(self.root):
            raise GitError(DETACHED.format(root=self.root))
        if paths is not None:
            return await self._commit_paths(message, paths)
        for args in _staging(self.root):
            await self._git(*args)
        if await self._git_status("diff", "--cached", "--quiet") == 0:
            return False
        await self._git(*_IDENTITY, *_QUIET, "commit", "-q", "--no-verify", "-m", message)
        return True

    async def _commit_paths(self, message: str, paths: Collection[str]) -> bool:
        """Commit these paths as they are on disk (gone: removed), nothing else.

        `add -A .` walks every file of the tree and `commit` refreshes the whole index,
        work that grows with the memory; here the files go in as one `fast-import`
        stream (one pack, no loose object per file; `git_import`), and the index is set
        to their blobs. A commit that changed nothing (files written back as they were)
        is taken back."""
        if not paths:
            return False
        branch = git_import.head_branch(self.root)
        if branch is None or not all(git_import.importable(p) for p in paths):
            return await self._commit(message, None)  # odd names, or no plain HEAD: all
        parent = await self._git_status("rev-parse", "--verify", "-q", branch) == 0
        try:
            found = await asyncio.to_thread(
                git_import.changes, self.root, paths, await self._object_format()
            )
        except OSError as exc:  # a file that cannot be read: as git would have failed
            raise GitError(f"cannot read a file to commit: {exc}") from None
        if not parent and all(change.removed for change in found):
            return False  # a first commit of nothing
        stream = git_import.import_stream(branch, parent, message, found)
        await self._git_bytes("fast-import", "--quiet", "--done", stdin=stream)
        if parent and await self._took_back_if_empty(branch):
            return False
        await self._git_bytes(
            "update-index", "-z", "--index-info", stdin=git_import.index_info(found)
        )
        if git_import.pack_count(self.root) > git_import.PACKS_BEFORE_REPACK:
            await self._repack()
        return True

    async def _took_back_if_empty(self, branch: str) -> bool:
        """Whether the commit just made has its parent's tree; if so, the branch is moved
        back to the parent (`git log` shows no empty commit)."""
        out = await self._git(
            "rev-parse", branch, f"{branch}^", f"{branch}^{{tree}}", f"{branch}^^{{tree}}"
        )
        made, parent, tree, parent_tree = out.split()
        if tree != parent_tree:
            return False
        await self._git("update-ref", "-m", "memlane: nothing changed", branch, parent, made)
        return True

    async def _repack(self) -> None:
        """Combine the packs fast-import left (geometric: the small ones, not the history;
        a git too old for it repacks all). The commit is made: a failure is only logged."""
        for args in (("--geometric=2",), ("-a",)):
            code, _, err = await self._run("repack", "-d", "-l", "-q", *args)
            if code == 0:
                return
        log.warning("memory repository not repacked: %s", err.strip()[:300])

    async def _object_format(self) -> str:
        """The repository's hash (`sha1`, or `sha256` where it was made so); asked once."""
        if self._format is None:
            code, out, _ = await self._run("rev-parse", "--show-object-format")
            self._format = out.strip() if code == 0 and out.strip() else "sha1"
        return self._format

    @contextlib.asynccontextmanager
    async def purging(
        self, fact_ids: Sequence[str], texts: Sequence[str], message: str
    ) -> AsyncIterator[PurgeReport]:
        """Rewrite the history without these entries' files and texts (`files.git_purge`,
        `message` recording it), then hold the repository while the caller removes those
        files: out of the history but still on disk, a commit would take them back."""
        async with self._held():
            try:
                report = await asyncio.to_thread(
                    purge_history, self.root, fact_ids, texts, message=message
                )
            except PurgeError as exc:
                raise GitError(str(exc)) from None
            yield report

    async def log(self, *, limit: int = 20, path: str | None = None) -> list[LogEntry]:
        """Newest first."""
        if not (self.root / ".git").exists():
            return []
        args = ["log", f"-n{limit}", "--format=%H%x1f%cI%x1f%B%x1e"]
        if path:
            args += ["--", path]
        out = await self._git(*args)
        entries = []
        for record in out.split("\x1e"):
            record = record.strip("\n")
            if not record:
                continue
            commit, date, message = record.split("\x1f", 2)
            entries.append(LogEntry(commit, date, message.strip()))
        return entries

    async def changes(self, pattern: str, *, limit: int = 20) -> list[Change]:
        """Commits touching files that match the glob `pattern` (relative to the root), newest
        first, each with its diff: a memory's history across edits, moves and deletion."""
        if not (self.root / ".git").exists():
            return []
        out = await self._git(
            "log",
            f"-n{limit}",
            "-p",
            "--format=%x1e%H%x1f%cI%x1f%B%x1f",
            "--",
            f":(glob){pattern}",
        )
        found = []
        for record in out.split("\x1e"):
            if not record.strip():
                continue
            commit, date, message, diff = record.split("\x1f", 3)
            found.append(Change(commit, date, message.strip(), diff.strip("\n")))
        return found

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        """The repository to this caller: this process's others wait, and with a home every
        other process's too."""
        async with self._locked():
            if self.home_lock is None:
                yield
                return
            async with self.home_lock.hold():
                yield

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _git(self, *args: str, stdin: str | None = None) -> str:
        code, out, err = await self._run(*args, stdin=stdin)
        if code != 0:
            raise GitError(f"git {_command(args)} failed: {err.strip() or out.strip()}")
        return out

    async def _git_bytes(self, *args: str, stdin: bytes) -> bytes:
        code, out, err = await self._run_bytes(*args, stdin=stdin)
        if code != 0:
            message = err.decode("utf-8", "replace").strip()
            raise GitError(f"git {_command(args)} failed: {message}")
        return out

    async def _git_status(self, *args: str) -> int:
        code, _, _ = await self._run(*args)
        return code

    async def _run(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        code, out, err = await self._run_bytes(
            *args, stdin=stdin.encode("utf-8") if stdin is not None else None
        )
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    async def _run_bytes(self, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        """git's exit code, output and errors, run from a worker thread. An asyncio
        subprocess is started on the event loop, and uvloop starts it with a `fork` of
        the whole process, whose page tables grow with its memory: at 300 MB resident,
        5.8 ms of CPU a start, and the loop (every request of the process) held about
        26 ms. `subprocess` starts it with `vfork` (CPython, Linux): 1.7 ms, the loop
        free meanwhile (`benchmarks/git_spawn.py`)."""
        try:
            done = await asyncio.to_thread(
                subprocess.run,
                ["git", *args],
                cwd=self.root,
                env=_env(),
                input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        return done.returncode, done.stdout, done.stderr


def _command(args: Sequence[str]) -> str:
    """The git command among a call's arguments (after `-c name=value` options)."""
    return next((a for a in args if not a.startswith("-") and "=" not in a), "")


async def commit_quietly(repo: GitRepo, message: str, paths: Collection[str] | None = None) -> bool:
    """Commit, logging instead of raising: history is a convenience, never a reason to fail."""
    try:
        return await repo.commit(message, paths)
    except (GitError, OSError, ValueError) as exc:  # a message or path git cannot take, too
        log.warning("memory not versioned this time: %s", exc)
        return False
