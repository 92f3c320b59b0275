"""Whether the code a memory cites moved on: checked when the memory is recalled.

A memory that cites project files (`Fact.cites`, recorded by `engine.memory.cites`) is
compared with the files as they are now:

- each cited file is stat'ed; its content identity is computed again only when its size
  or mtime changed since this process last hashed it (`ProjectChecks`, a cache keyed by
  path, size and mtime_ns), so a memory whose files did not change costs a few stats;
- a file with another identity: `changed` (with the commit range when HEAD moved);
- a missing file that git renamed between the recorded HEAD and today's: `moved` (the
  new path; renames are asked of git once per pair of commits, in the background, and
  cached: until then the file counts as deleted);
- a missing file: `deleted`; the memory is stale and ranked below current ones.

Nothing is read outside the project folder (`files.project.inside`), nor when that
folder is not on this machine; a memory of a namespace scope is checked only against
that namespace's folder. Any failure leaves the memory unchecked (fail open).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import Literal

from memlane.engine.memory.scopes import NAMESPACE_PREFIX, unqualified
from memlane.files import project
from memlane.types import Citations, CitedFile, Fact

log = logging.getLogger("memlane.memory")

FileStatus = Literal["current", "changed", "moved", "deleted"]
Status = Literal["current", "changed", "moved", "deleted", "unchecked"]
_WORST: tuple[FileStatus, ...] = ("deleted", "changed", "moved", "current")
MAX_CACHED = 50_000
"""Files whose identity the cache keeps; past it, it starts again."""
MAX_RENAME_PAIRS = 256


@dataclass(frozen=True, slots=True)
class FileCheck:
    """One cited file now."""

    path: str
    status: FileStatus
    moved_to: str | None = None

    @property
    def said(self) -> str:
        """How the injected memory says it: `conf/app.toml has changed since`."""
        if self.status == "moved":
            return f"{self.path} moved to {self.moved_to}"
        if self.status == "changed" and self.moved_to:
            return f"{self.path} moved to {self.moved_to} and has changed since"
        if self.status == "changed":
            return f"{self.path} has changed since"
        if self.status == "deleted":
            return f"{self.path} has been deleted since"
        return f"{self.path} unchanged"


@dataclass(frozen=True, slots=True)
class Staleness:
    """A memory's cited files checked against the project now."""

    status: Status
    files: tuple[FileCheck, ...] = ()
    cites: Citations | None = None
    head: str | None = None
    """The project's HEAD now."""

    @property
    def stale(self) -> bool:
        """A cited file changed, moved or is gone."""
        return self.status in ("changed", "moved", "deleted")

    @property
    def commits(self) -> str | None:
        """`abc1234..def5678` when the project's HEAD moved since the files were noted."""
        then = self.cites.head if self.cites is not None else None
        if then is None or self.head is None or then == self.head:
            return None
        return f"{then[:7]}..{self.head[:7]}"

    @property
    def note(self) -> str:
        """`noted 2026-11-02; conf/app.toml has changed since (abc1234..def5678)`; empty
        when the memory is current or unchecked."""
        if not self.stale or self.cites is None:
            return ""
        said = "; ".join(f.said for f in self.files if f.status != "current")
        commits = self.commits
        tail = f" ({commits})" if commits else ""
        return f"noted {self.cites.noted_at.date().isoformat()}; {said}{tail}"


UNCHECKED = Staleness("unchecked")
Heads = dict[str, tuple[Path | None, str | None]]
"""The project folders a recall checks in (by recorded root): the folder, if here, and its
HEAD, each read once per recall."""


class ProjectChecks:
    """The process's cache of cited files' identities and of git's renames; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._identities: dict[tuple[str, str], tuple[int, int, str]] = {}
        self._targets: dict[tuple[str, str], str] = {}
        self._renames: dict[tuple[str, str, str], dict[str, str]] = {}
        self.wanted: set[tuple[str, str, str]] = set()
        """Pairs of commits (root, old, new) whose renames a check needed and nobody has
        asked git for yet: `fill_renames` (the background) does."""
        self.lookup_planned = False
        """A background lookup of the wanted renames is planned and has not ended
        (`verify.renames_later`)."""

    def check(
        self, fact: Fact, *, budget: int | None = None, heads: Heads | None = None
    ) -> Staleness:
        """`fact`'s cited files now (at most `budget` of them); never raises. `heads`: the
        projects' HEADs read by this recall so far (each read once)."""
        cites = fact.cites
        if cites is None:
            return UNCHECKED
        try:
            if not _own(fact, cites):
                return UNCHECKED
            heads = {} if heads is None else heads
            if cites.root not in heads:
                folder = project.project_folder(cites.root)
                heads[cites.root] = (folder, project.read_head(folder) if folder else None)
            root, head = heads[cites.root]
            if root is None:
                return UNCHECKED
            files = cites.files if budget is None else cites.files[: max(budget, 0)]
            if not files:
                return UNCHECKED
            checked = tuple(self._file(root, cited, cites.head, head) for cited in files)
        except (OSError, ValueError) as exc:
            log.info("cited files of %s not checked: %s", fact.id, exc)
            return UNCHECKED
        found = {f.status for f in checked}
        worst: Status = next((s for s in _WORST if s in found), "current")
        return Staleness(worst, checked, cites, head)

    def check_all(self, facts: Sequence[Fact], *, budget: int) -> dict[str, Staleness]:
        """Each fact's staleness, checking at most `budget` files in all (the rest stay
        unchecked)."""
        out: dict[str, Staleness] = {}
        heads: Heads = {}
        for fact in facts:
            if fact.cites is None or budget <= 0:
                continue
            out[fact.id] = self.check(fact, budget=budget, heads=heads)
            budget -= len(fact.cites.files)
        return out

    def _file(self, root: Path, cited: CitedFile, then: str | None, now: str | None) -> FileCheck:
        current = self.identity(root, cited.path, cited.blob)
        if current is not None:
            return FileCheck(cited.path, "current" if current == cited.blob else "changed")
        moved = self._moved(root, cited.path, then, now)
        there = self.identity(root, moved, cited.blob) if moved is not None else None
        if there is None:
            return FileCheck(cited.path, "deleted")
        return FileCheck(cited.path, "moved" if there == cited.blob else "changed", moved)

    def identity(self, root: Path, relative: str, like: str) -> str | None:
        """The identity (in `like`'s form) of the project file `relative`, from the cache
        while its size and mtime are those it was hashed at; None when it is not a regular
        file inside the project (a link is followed only where it stays inside)."""
        target = self._target(root, relative)
        if target is None:
            return None
        try:
            stat = os.lstat(target)
        except OSError:
            return None
        if S_ISLNK(stat.st_mode):  # became a link since it was resolved: resolve again
            with self._lock:
                self._targets.pop((str(root), relative), None)
            target = self._target(root, relative)
            stat = os.lstat(target) if target is not None else stat
        if target is None or not S_ISREG(stat.st_mode):
            return None
        if stat.st_size > project.MAX_HASHED_BYTES:  # recorded smaller: it has changed
            return f"size:{stat.st_size}"
        kind = project.GIT_PREFIX if like.startswith(project.GIT_PREFIX) else project.HASH_PREFIX
        key = (target, kind)
        with self._lock:
            known = self._identities.get(key)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
            return known[2]
        with open(target, "rb") as file:
            value = project.identity(file.read(), kind)
        with self._lock:
            if len(self._identities) >= MAX_CACHED:
                self._identities.clear()
            self._identities[key] = (stat.st_size, stat.st_mtime_ns, value)
        return value

    def _target(self, root: Path, relative: str) -> str | None:
        """Where `relative` resolves inside `root` (`files.project.inside`), remembered: a
        path resolved once is not walked again on every recall."""
        key = (str(root), relative)
        with self._lock:
            known = self._targets.get(key)
        if known is None:
            found = project.inside(root, relative)
            known = str(found) if found is not None else ""
            with self._lock:
                if len(self._targets) >= MAX_CACHED:
                    self._targets.clear()
                self._targets[key] = known
        return known or None

    def _moved(self, root: Path, path: str, then: str | None, now: str | None) -> str | None:
        """Where git says `path` went between the two commits, if it has been asked."""
        if then is None or now is None or then == now:
            return None
        key = (str(root), then, now)
        with self._lock:
            known = self._renames.get(key)
            if known is None:
                self.wanted.add(key)
                return None
        return known.get(path)

    def fill_renames(self) -> int:
        """Ask git for the renames the checks needed (blocking: background or a command);
        how many pairs of commits were asked."""
        with self._lock:
            wanted, self.wanted = self.wanted, set()
        for root, old, new in wanted:
            moved = project.renames(Path(root), old, new)
            with self._lock:
                if len(self._renames) >= MAX_RENAME_PAIRS:
                    self._renames.clear()
                self._renames[(root, old, new)] = moved
        return len(wanted)


def _own(fact: Fact, cites: Citations) -> bool:
    """Whether `fact` may be checked in the folder it recorded: a namespace's memory only
    in that namespace's own folder."""
    inner = unqualified(fact.scope)
    return not inner.startswith(NAMESPACE_PREFIX) or inner[len(NAMESPACE_PREFIX) :] == cites.root
