"""Several processes on one home (the workers of `serve --workers`, the CLI beside a proxy).

Each "process" here is a runtime with its own store connection and its own memory book
over the same home, as two processes have: nothing is shared but the files and the
database.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.memory.entries import new_fact
from memlane.engine.runtime import Runtime
from memlane.files import admin_token
from memlane.files.memory_files import new_id
from memlane.files.memory_snapshot import Snapshot
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact
from tests.engine.memory.conftest import agree

MakeRuntime = Callable[..., Runtime]


@pytest.fixture
async def processes(settings: Settings, tmp_path: Path) -> AsyncIterator[MakeRuntime]:
    made: list[Runtime] = []

    def make(*, primary: bool = True) -> Runtime:
        runtime = Runtime(settings, SQLiteStore(tmp_path / "memlane.db"), primary=primary)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.background.drain()
        runtime.close()


def turn(text: str, role: str = "user") -> Fact:
    return new_fact(
        scope="conv:s1",
        conversation_id="s1",
        role=role,  # type: ignore[arg-type]
        text=text,
        fact_id=new_id(),
        source_session="s1",
    )


async def test_files_another_process_wrote_are_not_taken_for_hand_edits(
    processes: MakeRuntime,
) -> None:
    primary, other = processes(), processes(primary=False)
    entries = [turn(f"written by the other worker {i}") for i in range(3)]
    await other.memory_book.write(puts=entries)
    book = primary.memory_book
    assert book.files is not None
    paths = set(book.files.scan())
    assert len(paths) == 3
    # what the primary's watcher reports for those files: nothing a person changed
    assert await book.on_files_changed(paths) == 0
    assert book.commits.pending == []
    agree(book)


async def test_a_hand_deletion_of_a_file_another_process_wrote_leaves_the_index(
    processes: MakeRuntime,
) -> None:
    primary, other = processes(), processes(primary=False)
    kept, removed = turn("kept"), turn("deleted by hand")
    await other.memory_book.write(puts=[kept, removed])
    book = primary.memory_book
    assert book.files is not None
    path = book.files.find(removed)
    assert path is not None
    path.unlink()
    assert await book.on_files_changed({path}) == 1
    assert primary.store.get_fact(removed.id) is None
    assert primary.store.get_fact(kept.id) is not None
    agree(book)


async def test_a_move_to_deleted_by_another_process_is_not_a_deletion(
    processes: MakeRuntime,
) -> None:
    primary, other = processes(), processes(primary=False)
    entry = turn("soon a tombstone")
    await other.memory_book.write(puts=[entry])
    book = primary.memory_book
    assert book.files is not None
    before = book.files.find(entry)
    assert before is not None
    await other.memory_book.write(tombstones=[(entry, None)])
    after = book.files.find(entry)  # the tombstone lives under deleted/ now
    assert await book.on_files_changed({before, *book.files.scan()}) == 0
    stored = primary.store.get_fact(entry.id)
    assert stored is not None
    assert stored.deleted
    assert after is None


async def test_each_process_saves_its_own_changes_into_one_snapshot(
    processes: MakeRuntime,
) -> None:
    first, second = processes(), processes(primary=False)
    a, b = turn("from the first"), turn("from the second")
    await first.memory_book.write(puts=[a])
    await second.memory_book.write(puts=[b])
    await first.memory_book.flush()
    await second.memory_book.flush()  # saved last: it must not drop the first's entry
    other_tree = second.memory_book.tree
    assert other_tree is not None
    assert not other_tree.snapshot.held  # a worker that is not the primary only writes it
    saved = Snapshot.load(first.settings.memory_path)
    assert {seen.fact_id for rel in saved.paths() if (seen := saved.get(rel))} == {a.id, b.id}

    await first.memory_book.write(tombstones=[(a, None)])  # a's file moves under deleted/
    await first.memory_book.flush()
    await second.memory_book.write(puts=[turn("later")])
    await second.memory_book.flush()  # second's stale copy must not bring back a's old path
    book = first.memory_book
    assert book.files is not None
    saved = Snapshot.load(first.settings.memory_path)
    on_disk = {book.files.relative(p) for p in book.files.scan()}
    assert set(saved.paths()) == on_disk


def test_a_snapshot_pop_is_not_undone_by_a_save_that_merges(tmp_path: Path) -> None:
    one, two = Snapshot.load(tmp_path), Snapshot.load(tmp_path)
    one.set("a.md", "h1", "a")
    one.set("b.md", "h2", "b")
    one.save()
    two.set("c.md", "h3", "c")
    two.save()  # merges: a, b, c
    one.pop("a.md")
    one.save()  # merges: b, c
    two.set("d.md", "h4", "d")
    two.save()  # two never knew of a's removal, and must not revive it
    assert sorted(Snapshot.load(tmp_path).paths()) == ["b.md", "c.md", "d.md"]


async def test_only_the_primary_catches_the_index_up_with_the_files(
    processes: MakeRuntime,
) -> None:
    writer = processes()
    await writer.memory_book.write(puts=[turn("on disk")])
    writer.store.purge_fact(writer.store.list_facts()[0].id)  # the index lost it
    other = processes(primary=False)
    assert (await other.memory_book.ready()).scanned == 0
    assert other.store.list_facts() == []
    primary = processes()
    report = await primary.memory_book.ready()
    assert (report.scanned, report.indexed) == (1, 1)
    assert [f.text for f in primary.store.list_facts()] == ["on disk"]


def _ensure(home: str, out: multiprocessing.Queue[str]) -> None:
    out.put(admin_token.ensure(Path(home), None))


def test_processes_starting_at_once_share_one_generated_admin_token(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[str] = context.Queue()
    starters = [context.Process(target=_ensure, args=(str(tmp_path), out)) for _ in range(6)]
    for process in starters:
        process.start()
    tokens = {out.get(timeout=60) for _ in starters}
    for process in starters:
        process.join(30)
    assert tokens == {admin_token.read(tmp_path)}
    assert (tmp_path / admin_token.TOKEN_FILE).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [admin_token.TOKEN_FILE]  # no temp files
