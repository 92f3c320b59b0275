"""The memory repository's commits: a queued commit stages the paths the book touched, and
what a person changed by hand is still committed (the sweep at start, at stop)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import pytest

from memlane.engine.background import Background
from memlane.engine.memory.book import MemoryBook, history
from memlane.engine.memory.book.history import CommitQueue
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.lifecycle import stop_memory
from memlane.engine.runtime import Runtime
from memlane.files.git import GitRepo
from memlane.files.memory_files import ENTRIES, new_id
from memlane.types import Fact
from tests.support.gitrepo import changed_in_head
from tests.support.gitrepo import git_output as git


def entry(text: str) -> Fact:
    return new_fact(scope="global", conversation_id="c", role="user", text=text, fact_id=new_id())


async def test_a_queued_commit_stages_what_the_book_touched_and_a_hand_edit_follows(
    rt: Runtime, book: MemoryBook
) -> None:
    assert book.files is not None
    root = book.files.root
    first, gone = entry("first turn"), entry("soon replaced")
    await book.write(puts=[first, gone])
    book.commit_later("memory: two turns")
    assert await book.flush()  # the first commit of the process: the whole tree
    by_hand = book.files.find(first)
    assert by_hand is not None
    by_hand.write_text(by_hand.read_text().replace("first turn", "edited by a person"))

    later = entry("a later turn")
    await book.write(puts=[later], tombstones=[(gone, None)])
    book.commit_later("memory: one more")
    assert await book.flush()
    later_path, tomb = book.files.find(later), book.files.find(replace(gone, deleted=True))
    assert later_path is not None
    assert tomb is not None
    committed = changed_in_head(root)
    rel = book.files.relative
    assert sorted(committed) == sorted(
        [
            f"A\t{rel(later_path)}",
            f"A\t{rel(tomb)}",  # the tombstone under deleted/, its active file removed
            f"D\t{rel(tomb).replace('deleted/', '')}",
        ]
    )
    assert git(root, "status", "--porcelain") == f" M {rel(by_hand)}\n"

    book.commit_later("memory: at stop")
    await stop_memory(rt)  # the flush at stop sweeps in what no watcher saw
    assert git(root, "status", "--porcelain") == ""
    assert f"M\t{rel(by_hand)}" in changed_in_head(root)


async def test_a_hand_edit_is_committed_at_stop_when_no_change_of_memlanes_waits(
    rt: Runtime, book: MemoryBook
) -> None:
    assert book.files is not None
    root = book.files.root
    kept = entry("the deploy goes through staging")
    await book.write(puts=[kept])
    book.commit_later("memory: one turn")
    assert await book.flush()
    by_hand = book.files.find(kept)
    assert by_hand is not None
    by_hand.write_text(by_hand.read_text().replace("staging", "the canary"))
    assert not await book.flush()  # no sweep asked for: nothing of memlane's waits

    await stop_memory(rt)  # nothing queued, yet the stop's sweep takes the person's edit
    assert git(root, "status", "--porcelain") == ""
    assert f"M\t{book.files.relative(by_hand)}" in changed_in_head(root)
    assert git(root, "log", "-1", "--format=%s").strip() == history.HAND_EDITS_MESSAGE
    assert not await book.flush(sweep=True)  # nothing left: no empty commit


class GatedRepo(GitRepo):
    """A real repository whose commits wait for `gate`: a commit held while it runs."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def commit(self, message: str, paths: Collection[str] | None = None) -> bool:
        self.started.set()
        await self.gate.wait()
        return await super().commit(message, paths)


async def test_paths_noted_while_a_commit_runs_wait_for_the_next_one(tmp_path: Path) -> None:
    repo = GatedRepo(tmp_path)
    noted: list[set[str]] = []

    async def persist() -> set[str]:  # what the book wrote since the last save
        return noted.pop(0) if noted else set()

    queue = CommitQueue(repo, Background(), persist)

    async def written(name: str, *, message: str | None) -> None:
        (tmp_path / ENTRIES).mkdir(exist_ok=True)
        (tmp_path / ENTRIES / name).write_text(f"{name}\n")
        noted.append({f"{ENTRIES}/{name}"})
        if message is not None:
            queue.later(message)

    repo.gate.set()
    await written("a.md", message="one")
    assert await queue.flush()  # the first: every memory file
    repo.gate.clear()
    repo.started.clear()
    await written("b.md", message="two")
    running = asyncio.create_task(queue.flush())
    await repo.started.wait()  # b.md's commit runs...
    await written("c.md", message=None)
    assert not await queue.flush()  # ...while c.md is noted, with nothing queued to say
    repo.gate.set()
    assert await running
    queue.later("three")
    assert await queue.flush()  # c.md was kept for this one
    assert sorted(git(tmp_path, "ls-files").split()) == [
        ".gitignore",
        *(f"{ENTRIES}/{name}" for name in ("a.md", "b.md", "c.md")),
    ]


def _queue_on(root: Path, background: Background) -> CommitQueue:
    """A commit queue over a real repository at `root` whose book wrote an entry."""
    (root / ENTRIES).mkdir()
    (root / ENTRIES / "a.md").write_text("a turn\n")

    async def persist() -> set[str]:
        return {f"{ENTRIES}/a.md"}

    return CommitQueue(GitRepo(root), background, persist)


async def test_a_commit_due_while_the_background_is_full_waits_for_room_and_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load every job slot can be taken when a commit falls due. Dropped, the
    changes queued for it stayed uncommitted until a later change came (if any came):
    the commit must wait for room instead."""
    monkeypatch.setattr(history, "COMMIT_QUIET_SECONDS", 0.0)
    background = Background(max_pending=1)
    held = asyncio.Event()
    background.spawn(held.wait(), name="held")  # the only slot
    queue = _queue_on(tmp_path, background)

    queue.later("memory: a turn")
    await asyncio.sleep(0.05)  # the commit falls due while the slot is taken
    assert (background.pending, background.dropped) == (2, 0)
    held.set()
    await background.drain()
    assert git(tmp_path, "log", "--format=%s").splitlines() == ["memory: a turn"]
    assert git(tmp_path, "status", "--porcelain") == ""


async def test_changes_queued_while_a_commit_waits_to_begin_go_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a commit is due every change asks for one at once; while one waits for room,
    the next changes join it instead of each planning one more."""
    monkeypatch.setattr(history, "COMMIT_QUIET_SECONDS", 0.0)
    background = Background(max_pending=1)
    held = asyncio.Event()
    background.spawn(held.wait(), name="held")
    queue = _queue_on(tmp_path, background)

    for n in range(3):
        queue.later(f"memory: turn {n}")
        await asyncio.sleep(0.05)
    assert background.pending == 2  # the held job, and one commit waiting for room
    held.set()
    await background.drain()
    assert git(tmp_path, "log", "--format=%s").splitlines() == ["memory: 3 updates"]


async def test_a_burst_of_changes_is_one_commit_once_the_oldest_waited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a steady stream no quiet period ever comes: the oldest change's wait bounds
    the commit, and everything queued by then goes into it, however many (a bound by
    count ran git every few seconds under load)."""
    monkeypatch.setattr(history, "COMMIT_QUIET_SECONDS", 60.0)
    monkeypatch.setattr(history, "COMMIT_MAX_WAIT_SECONDS", 0.3)
    background = Background()
    queue = _queue_on(tmp_path, background)

    for n in range(150):
        queue.later(f"memory: turn {n}")
    await asyncio.sleep(0)
    assert background.pending == 0  # not due yet
    await asyncio.sleep(0.4)  # the commit's timer, due at 0.3 s, fires first
    await background.drain()
    assert git(tmp_path, "log", "--format=%s").splitlines() == ["memory: 150 updates"]
    assert queue.pending == []
