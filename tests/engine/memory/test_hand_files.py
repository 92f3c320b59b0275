"""What a person puts into the memory folder by hand: an id that is a path, a link to a
file elsewhere, a file far bigger than any memory, a credential typed into a memory.
Each is caught at the catch-up, by the watcher's batch and before a commit alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.lifecycle import stop_memory
from memlane.engine.memory.manage import MemoryNotFound, add_memory, edit_memory
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.files.memory_checks import max_entry_bytes
from tests.engine.memory.conftest import agree
from tests.support.gitrepo import every_object
from tests.support.gitrepo import git_output as git

SECRET = "AKIAIOSFODNN7EXAMPLE"
REDACTED = "[redacted aws-access-key]"


def facts_folder(book: MemoryBook) -> Path:
    assert book.files is not None
    folder = book.files.entries / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def hand_file(book: MemoryBook, name: str, text: str, head: str = "") -> Path:
    path = facts_folder(book) / name
    path.write_text(f"---\n{head}role: memory\nscope: global\n---\n\n{text}\n")
    return path


def markdown_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.md"))


async def found(rt: Runtime, query: str) -> list[str]:
    return [h.text for h in await search(rt, query, scopes=["global"], top_k=10)]


async def test_an_id_that_is_a_path_is_skipped_and_nothing_is_written_outside(
    rt: Runtime, book: MemoryBook, tmp_path: Path
) -> None:
    evil_id = "../../../../../../outside/qa-evil3"
    evil = hand_file(book, "evil3.md", "x lime", head=f"id: {evil_id}\n")
    report = await book.sync_files(rebuild=False)  # the catch-up at a start or a command
    (why,) = report.skipped
    assert str(evil) in why
    assert "is not a memory id" in why
    assert rt.store.get_fact(evil_id) is None
    with pytest.raises(MemoryNotFound):
        await edit_memory(rt, evil_id, "written outside")
    assert await book.on_files_changed({evil}) == 1  # the watcher: a person's file, skipped
    assert rt.store.get_fact(evil_id) is None
    assert markdown_under(tmp_path) == [evil]


async def test_a_link_to_a_file_outside_the_memory_is_not_indexed(
    rt: Runtime, book: MemoryBook, tmp_path: Path
) -> None:
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    link = facts_folder(book) / "passwd.md"
    link.symlink_to(outside)
    report = await book.sync_files(rebuild=False)
    assert report.skipped == [f"{link}: is a symbolic link (to {outside}): not followed"]
    assert await book.on_files_changed({link}) == 1
    assert await found(rt, "root") == []
    assert rt.store.list_facts() == []


async def test_a_file_bigger_than_any_entry_is_skipped(rt: Runtime, book: MemoryBook) -> None:
    assert book.files is not None
    assert book.files.max_bytes == max_entry_bytes(rt.settings.memory_message_chars)
    big = hand_file(book, "big.md", "The user likes limes " * 600_000)  # about 13 MB
    kept = await add_memory(rt, "The user owns a kayak", scope="global")
    report = await book.sync_files(rebuild=False)
    (why,) = report.skipped
    assert why.startswith(f"{big}: ")
    assert "more than the" in why
    assert [f.id for f in rt.store.list_facts()] == [kept.id]
    assert await found(rt, "limes") == []


async def test_a_credential_typed_into_a_file_is_redacted_in_the_index_and_the_file(
    rt: Runtime, book: MemoryBook
) -> None:
    path = hand_file(book, "keys.md", f"The deploy key is {SECRET}", head="id: deploykey1\n")
    report = await book.sync_files(rebuild=False)
    assert report.indexed == 1
    fact = rt.store.get_fact("deploykey1")
    assert fact is not None
    assert fact.text == f"The deploy key is {REDACTED}"
    on_disk = path.read_text()
    assert SECRET not in on_disk
    assert on_disk.startswith("---\nid: deploykey1\nrole: memory\nscope: global\n---\n")
    agree(book)
    # the rewrite is a change the watcher sees: the second look at it is a no-op
    assert await book.on_files_changed({path}) == 0
    assert path.read_text() == on_disk


async def test_a_credential_the_watcher_sees_is_never_committed(
    rt: Runtime, book: MemoryBook
) -> None:
    assert book.files is not None
    await add_memory(rt, "The user owns a kayak", scope="global")  # the repository exists
    path = hand_file(book, "keys.md", f"The deploy key is {SECRET}")
    assert await book.on_files_changed({path}) == 1
    root = book.files.root
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: 1 file added by hand"
    assert SECRET not in git(root, "show", f"HEAD:{book.files.relative(path)}")
    assert SECRET.encode() not in every_object(root)
    assert await found(rt, "deploy key") == [f"The deploy key is {REDACTED}"]


async def test_a_credential_no_watcher_saw_is_redacted_before_the_sweep_commits_it(
    rt: Runtime, book: MemoryBook
) -> None:
    """No watcher: a file a person writes while the proxy runs is committed by a sweep
    (every ten minutes, at stop) or a person's command, which take it in first."""
    assert book.files is not None
    await book.ready()
    await add_memory(rt, "The user owns a kayak", scope="global")
    path = hand_file(book, "keys.md", f"The deploy key is {SECRET}")
    await stop_memory(rt)  # the stop's sweep
    root = book.files.root
    assert git(root, "status", "--porcelain") == ""
    assert SECRET.encode() not in every_object(root)
    assert SECRET not in path.read_text()
    assert await found(rt, "deploy key") == [f"The deploy key is {REDACTED}"]

    again = hand_file(book, "keys2.md", f"The backup key is {SECRET}")
    await add_memory(rt, "The user owns a canoe", scope="global")  # a command's commit
    assert git(root, "status", "--porcelain") == ""
    assert SECRET.encode() not in every_object(root)
    assert SECRET not in again.read_text()
