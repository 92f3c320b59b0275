"""Files are the truth: hand edits, restarts, corrupt files, the watcher, reindex."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.memory import scopes
from memlane.engine.memory.ingest import TurnInput, ingest_turn
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.files.memory_snapshot import Snapshot
from memlane.store.sqlite import SQLiteStore
from tests.engine.memory.conftest import agree
from tests.support.gitrepo import git
from tests.support.text import ScriptedLLM

NS = scopes.namespace_scope("repo")


async def remember(rt: Runtime, llm: ScriptedLLM, *facts: str) -> None:
    llm.push(json.dumps(list(facts)), "Summary.")
    item = TurnInput(session_id="s1", namespace="repo", model="m", user_text="; ".join(facts))
    await ingest_turn(rt, item)


def fact_file(rt: Runtime, text: str) -> Path:
    book = rt.memory_book
    assert book.files is not None
    for path in book.files.scan():
        fact = book.files.read(path).fact
        if fact.role == "memory" and fact.text == text:
            return path
    raise AssertionError(f"no file holds {text!r}")


async def texts(rt: Runtime, query: str) -> list[str]:
    """Memories found for `query`, best first (dense search also returns weak matches)."""
    return [h.text for h in await search(rt, query, scopes=[NS], roles=("memory",), top_k=10)]


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 20.0) -> None:
    """Wait for the watcher (an OS notification) to have an effect; fail after `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the change never showed up")


def edit_body(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new))


async def test_restart_picks_up_edits_made_while_stopped(
    settings: Settings, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    first = Runtime(settings, store, _llm=scripted_llm)
    await remember(first, scripted_llm, "The user drives a red bicycle", "The user owns a kayak")
    edited = fact_file(first, "The user drives a red bicycle")
    removed = fact_file(first, "The user owns a kayak")
    folder = edited.parent
    await first.memory_book.flush()  # a clean stop (the proxy's shutdown does this)
    store.close()

    # memlane is stopped: a person edits one file, deletes one, writes a new one
    edit_body(edited, "red bicycle", "blue tandem bicycle")
    removed.unlink()
    (folder / "hand-written.md").write_text("The user collects vinyl records\n")

    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        second = Runtime(settings, store, _llm=scripted_llm)
        report = await second.memory_book.ready()
        assert report.indexed == 2
        assert report.removed == 1
        found = await texts(second, "bicycle")
        assert found[0] == "The user drives a blue tandem bicycle"
        assert "The user drives a red bicycle" not in found
        assert "The user owns a kayak" not in await texts(second, "kayak")
        assert (await texts(second, "vinyl records"))[0] == "The user collects vinyl records"
        agree(second.memory_book)
    finally:
        store.close()


async def test_after_the_catch_up_the_snapshot_is_written_not_held(
    settings: Settings, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    """A proxy reads the snapshot at start only: after its catch-up the copy in memory
    goes, and what the book writes later still reaches the file, so the next start finds
    every file unchanged without reading one."""
    store = SQLiteStore(tmp_path / "memlane.db")
    first = Runtime(settings, store, _llm=scripted_llm)
    book = first.memory_book
    await book.ready()
    tree = book.tree
    assert tree is not None
    assert not tree.snapshot.held
    await remember(first, scripted_llm, "The user plays the cello", "The user lives in Porto")
    await book.flush()
    assert not tree.snapshot.held
    files = tree.files
    written = {files.relative(path): files.read(path).digest for path in files.scan()}
    assert len(written) == 4  # two facts, the turn, the summary
    saved = Snapshot.load(files.root)
    assert {rel: s.digest for rel in saved.paths() if (s := saved.get(rel))} == written
    store.close()

    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        report = await Runtime(settings, store, _llm=scripted_llm).memory_book.ready()
        assert (report.indexed, report.unchanged) == (0, 4)
    finally:
        store.close()


async def test_a_corrupt_file_is_logged_skipped_and_its_fact_kept(
    rt: Runtime, scripted_llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    await remember(rt, scripted_llm, "The user prefers dark roast coffee")
    path = fact_file(rt, "The user prefers dark roast coffee")
    path.write_text("---\nid: [broken\n---\nThe user prefers tea\n")
    (path.parent / "junk.md").write_bytes(b"\xff\xfe not text")
    with caplog.at_level(logging.WARNING, logger="memlane.memory"):
        report = await rt.memory_book.sync_files()
    assert len(report.skipped) == 2
    assert "not valid YAML" in caplog.text
    assert "not UTF-8" in caplog.text
    assert await texts(rt, "coffee") == ["The user prefers dark roast coffee"]
    assert "The user prefers tea" not in await texts(rt, "tea")


async def test_reindex_rebuilds_a_lost_index_from_the_files(
    settings: Settings, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    settings = settings.model_copy(update={"memory_dense": "on"})  # vectors are rebuilt too
    store = SQLiteStore(tmp_path / "memlane.db")
    rt = Runtime(settings, store, _llm=scripted_llm)
    await remember(rt, scripted_llm, "The user speaks Portuguese")
    store.close()
    (tmp_path / "memlane.db").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"memlane.db{suffix}").unlink(missing_ok=True)
    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        fresh = Runtime(settings, store, _llm=scripted_llm)
        report = await fresh.memory_book.sync_files()
        assert (report.indexed, report.embedded) == (3, 3)  # the fact, the summary, the turn
        assert await texts(fresh, "Portuguese") == ["The user speaks Portuguese"]
    finally:
        store.close()


async def test_watcher_reindexes_a_hand_edit_without_restart(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    await remember(rt, scripted_llm, "The user's favourite editor is vim")
    book = rt.memory_book
    await book.start_watching()
    assert book.watch_task is not None
    assert rt.background.services == ["memory-watcher"]  # tracked: a death is logged
    path = fact_file(rt, "The user's favourite editor is vim")
    edit_body(path, "vim", "helix")

    async def edited() -> bool:
        return await texts(rt, "favourite editor") == ["The user's favourite editor is helix"]

    async def gone() -> bool:
        return await texts(rt, "favourite editor") == []

    await eventually(edited)
    path.unlink()
    await eventually(gone)
    await book.stop_watching()
    assert book.watch_task is None
    assert rt.background.services == []
    agree(book)


async def test_a_hand_edited_valid_to_closes_the_memory(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.push('["The user is on parental leave"]', "Summary.")
    said = datetime.now(UTC) - timedelta(days=1)
    item = TurnInput(session_id="s1", namespace="repo", model="m", user_text="leave", said_at=said)
    await ingest_turn(rt, item)
    book = rt.memory_book
    await book.start_watching()
    path = fact_file(rt, "The user is on parental leave")
    ended = datetime.now(UTC) - timedelta(minutes=1)
    text = path.read_text().replace("updated_at:", f"valid_to: '{ended.isoformat()}'\nupdated_at:")
    path.write_text(text)

    async def closed() -> bool:
        return await texts(rt, "parental leave") == []

    await eventually(closed)
    await book.stop_watching()
    (fact,) = rt.store.list_facts(roles=("memory",))
    assert (fact.deleted, fact.valid_to) == (False, ended)
    before = ended - timedelta(seconds=30)
    found = await search(rt, "parental leave", scopes=[NS], roles=("memory",), as_of=before)
    assert [h.text for h in found] == ["The user is on parental leave"]  # it was true then
    agree(book)


async def test_memlane_own_writes_are_not_reindexed_by_the_watcher(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    book = rt.memory_book
    await remember(rt, scripted_llm, "The user runs Debian")
    assert book.files is not None
    changed = await book.apply_file_changes(set(book.files.scan()))
    assert not changed


KAYAK = "The user owns a kayak named Pelican"


def commits(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


async def test_the_watcher_skips_a_copy_holding_the_same_id_as_the_catch_up_does(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    await remember(rt, scripted_llm, KAYAK)
    book = rt.memory_book
    assert book.files is not None
    assert book.tree is not None
    await book.flush()
    root = book.files.root
    await book.start_watching()
    original = fact_file(rt, KAYAK)
    copy = original.with_name("copy.md")
    shutil.copy(original, copy)
    rel = book.files.relative(copy)

    async def seen() -> bool:
        assert book.tree is not None
        return book.tree.snapshot.get(rel) is not None

    await eventually(seen)  # a copy as it is changes nothing
    before = commits(root)
    edit_body(copy, "Pelican", "Albatross")

    async def committed() -> bool:  # the watcher's batch is done once it committed
        return commits(root) > before

    await eventually(committed)
    await book.stop_watching()
    assert await texts(rt, "kayak") == [KAYAK]  # what the original file says
    report = await book.sync_files(rebuild=False)  # the catch-up at a start says the same
    (fact,) = rt.store.list_facts(roles=("memory",))
    assert report.skipped == [
        f"{copy}: id {fact.id} is already used by another file ({book.files.relative(original)})"
    ]
    assert await texts(rt, "kayak") == [KAYAK]


async def test_reindex_repairs_a_row_that_says_what_its_file_does_not(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    """A row that drifted from its file (a watcher before the duplicate rule indexed a
    copy's text) while the snapshot still matches the file: the catch-up trusts the
    hashes, `memlane memory reindex` compares every file with its row."""
    await remember(rt, scripted_llm, KAYAK)
    book = rt.memory_book
    (fact,) = rt.store.list_facts(roles=("memory",))
    rt.store.put_fact(replace(fact, text="The user owns a kayak named Albatross"))
    assert (await book.sync_files(rebuild=False)).indexed == 0
    report = await book.sync_files()  # what `memlane memory reindex` runs
    assert report.indexed == 1
    assert await texts(rt, "kayak") == [KAYAK]
    agree(book)


async def test_a_copy_deleted_by_hand_is_committed(rt: Runtime, scripted_llm: ScriptedLLM) -> None:
    await remember(rt, scripted_llm, KAYAK)
    book = rt.memory_book
    assert book.files is not None
    root = book.files.root
    original = fact_file(rt, KAYAK)
    copy = original.with_name("copy.md")
    copy.write_text(original.read_text().replace("Pelican", "Albatross"))
    assert await book.on_files_changed({copy}) == 1  # a person's file: committed, not indexed
    assert await texts(rt, "kayak") == [KAYAK]
    rel = book.files.relative(copy)
    assert git(root, "log", "-1", "--format=%B").strip() == (
        f"memory: 1 file changed by hand, not indexed\n\nnot indexed: {rel}"
    )
    copy.unlink()
    assert await book.on_files_changed({copy}) == 1
    assert git(root, "log", "-1", "--format=%B").strip() == (
        f"memory: 1 file removed by hand\n\nremoved: {rel}"
    )
    assert git(root, "status", "--porcelain") == ""
    agree(book)


async def test_a_copy_takes_the_id_over_when_the_file_holding_it_goes(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    """What the catch-up would index once the original is gone, the watcher indexes."""
    await remember(rt, scripted_llm, KAYAK)
    book = rt.memory_book
    original = fact_file(rt, KAYAK)
    copy = original.with_name("copy.md")
    copy.write_text(original.read_text().replace("Pelican", "Albatross"))
    await book.on_files_changed({copy})
    original.unlink()
    assert await book.on_files_changed({original}) == 1
    assert await texts(rt, "kayak") == ["The user owns a kayak named Albatross"]
    agree(book)


async def test_a_hand_edit_commit_says_what_was_added_edited_and_removed(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    await remember(rt, scripted_llm, KAYAK, "The user owns a red bicycle")
    book = rt.memory_book
    assert book.files is not None
    kayak, bicycle = fact_file(rt, KAYAK), fact_file(rt, "The user owns a red bicycle")
    edit_body(kayak, "Pelican", "Heron")
    bicycle.unlink()
    added = kayak.with_name("vinyl.md")
    added.write_text("The user collects vinyl records\n")
    summary = bicycle.parent.parent / "summaries"  # memlane's own file: not counted
    batch = {kayak, bicycle, added, *summary.glob("*.md")}
    assert await book.on_files_changed(batch) == 3
    rel = book.files.relative
    assert git(book.files.root, "log", "-1", "--format=%B").strip() == (
        "memory: 3 files changed by hand (1 added, 1 edited, 1 removed)\n\n"
        f"added: {rel(added)}\nedited: {rel(kayak)}\nremoved: {rel(bicycle)}"
    )


async def test_a_file_given_another_files_id_by_hand_leaves_the_index_as_a_rebuild_would(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    await remember(rt, scripted_llm, KAYAK, "The user owns a red bicycle")
    book = rt.memory_book
    kayak, bicycle = fact_file(rt, KAYAK), fact_file(rt, "The user owns a red bicycle")
    assert book.files is not None
    kayak_id, bicycle_id = book.files.read(kayak).fact.id, book.files.read(bicycle).fact.id
    kayak.write_text(kayak.read_text().replace(f"id: {kayak_id}", f"id: {bicycle_id}"))
    assert await book.on_files_changed({kayak}) == 1
    assert rt.store.get_fact(kayak_id) is None  # no file holds it any more
    report = await book.sync_files()  # a rebuild finds nothing to repair
    assert (report.indexed, report.removed) == (0, 0)
