"""Files are the truth: hand edits, restarts, corrupt files, the watcher, reindex."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
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
    assert changed == 0
