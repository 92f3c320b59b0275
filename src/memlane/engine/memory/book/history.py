"""The memory repository's history: a person's change committed at once, background
changes queued and committed together.

A busy proxy changes memory on every turn; running git for each would cost more than
the turn. Queued changes are committed once no new one came for
`COMMIT_QUIET_SECONDS`, or once the oldest has waited `COMMIT_MAX_WAIT_SECONDS`, and at
shutdown (`flush`), as one commit whose message lists each change. Under a steady stream
git so runs at a fixed pace, whatever the rate of turns: a bound by count (a commit per
100 changes) ran it every few seconds under 200 clients, each commit seconds of work
beside the requests.
A crash before a commit loses no memory, only its place in the history: the files are
written (and the snapshot saved) first, and the next process's first commit sweeps
the whole tree.

A queued commit stages only the paths the book wrote, moved or removed since the last
one (`Tree.touched`), so git's cost follows the turns, not the size of the memory. What
a person changed by hand is committed whole: by the watcher's commit, by a person's
own change (`commit`), and by a sweep of the whole tree on the first queued commit of
a process, then at least every `SWEEP_SECONDS` and at shutdown. Before each commit of
the whole tree the book takes in what a person changed since it last looked
(`take_in`: `MemoryBook.take_in_hand_edits`), so a credential typed into a file is
redacted before git stages it, with or without a watcher.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Sequence

from memlane.engine.background import Background
from memlane.files.git import GitRepo, commit_quietly
from memlane.text.redact import redact

COMMIT_QUIET_SECONDS = 5.0
"""Per-turn changes are committed together once no new change came for this long..."""
COMMIT_MAX_WAIT_SECONDS = 30.0
"""...or once the oldest has waited this long: git runs once per burst, never per turn."""
SWEEP_SECONDS = 600.0
"""A queued commit stages the whole tree (hand edits no watcher saw) at most this often."""

HAND_EDITS_MESSAGE = "memory: files edited by hand"
"""A sweep's commit when no change of memlane's waited: what is in it, a person did."""

Persist = Callable[[], Awaitable[Collection[str]]]
"""Saves the file snapshot; returns the paths written, moved or removed since its last call."""
TakeIn = Callable[[], Awaitable[object]]
"""Takes in what a person changed in the files (`MemoryBook.take_in_hand_edits`)."""


class CommitQueue:
    """Commits to the memory repository (`git` None: none kept, the snapshot still saved).

    `persist` saves the file snapshot; it runs before every commit, also without git.
    `take_in` runs before every commit of the whole tree: what a person changed is
    taken in (and redacted) before git stages it."""

    def __init__(
        self,
        git: GitRepo | None,
        background: Background,
        persist: Persist,
        *,
        take_in: TakeIn | None = None,
    ) -> None:
        self.git = git
        self._background = background
        self._persist = persist
        self._take_in = take_in
        self.pending: list[str] = []
        self._touched: set[str] = set()
        """Paths written since the last commit that staged them."""
        self._swept_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._oldest: float | None = None
        """When the oldest change waiting for a commit was queued (the loop's clock)."""
        self._planned = False
        """A flush is spawned and has not begun: it takes every change queued meanwhile."""

    async def commit(self, message: str) -> bool:
        """Commit now, the whole tree (a person's deliberate change: `memory add`, `edit`,
        `forget`, a hand edit the watcher saw)."""
        await self._taking_in()
        self._note(await self._persist())
        if self.git is None:
            return False
        self._sweeping()
        return await commit_quietly(self.git, redact(message))

    def later(self, message: str) -> None:
        """Queue a background change for the next coalesced commit."""
        self.pending.append(redact(message))  # messages quote memories
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._oldest is None:
            self._oldest = now
        due = min(now + COMMIT_QUIET_SECONDS, self._oldest + COMMIT_MAX_WAIT_SECONDS)
        self._timer = loop.call_at(due, self._start_flush)

    def _start_flush(self) -> None:
        """Spawn the commit of the changes queued so far, one at a time. A busy background
        makes it wait for room, never drops it (nothing else records these changes); the
        changes queued while it waits join it, instead of each spawning one more (once
        the oldest is due, every change asks for a commit at once)."""
        self._timer = None
        if not self._planned:
            self._planned = self._background.spawn(self._planned_flush(), name="memory-git-commit")

    async def _planned_flush(self) -> None:
        self._planned = False  # what is queued from now on plans a flush of its own
        await self.flush()

    async def flush(self, *, sweep: bool = False) -> bool:
        """Commit every queued change now, as one commit; False when nothing was committed.

        It stages the paths written since the last commit, or the whole tree (`sweep`,
        or when the last sweep is `SWEEP_SECONDS` old). A `sweep` with no change queued
        still commits the files edited by hand since the last commit (at shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        messages, self.pending, self._oldest = self.pending, [], None
        if messages:
            sweep = (
                sweep or self._swept_at is None or time.monotonic() - self._swept_at > SWEEP_SECONDS
            )
        if sweep:
            await self._taking_in()
        self._note(await self._persist())
        if self.git is None:
            return False
        if not messages:  # a sweep asked for (shutdown) still takes what a person changed
            if not sweep:
                return False
            self._sweeping()
            return await commit_quietly(self.git, HAND_EDITS_MESSAGE)
        if sweep:
            self._sweeping()
            return await commit_quietly(self.git, combined_message(messages))
        # taken before the commit runs: what is noted meanwhile waits for the next one
        paths, self._touched = sorted(self._touched), set()
        return await commit_quietly(self.git, combined_message(messages), paths)

    async def _taking_in(self) -> None:
        """A commit of the whole tree comes: what a person changed is taken in first."""
        if self.git is not None and self._take_in is not None:
            await self._take_in()

    def _note(self, touched: Collection[str]) -> None:
        if self.git is not None:  # without git, nothing would ever take them
            self._touched.update(touched)

    def _sweeping(self) -> None:
        """A commit of the whole tree starts: it stages every path noted so far."""
        self._touched = set()
        self._swept_at = time.monotonic()


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
