"""`files.entry_lookup`: an entry's files are found by the id in their front matter."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from memlane.files.entry_lookup import front_matter_ids, ids_held, locate
from memlane.files.memory_files import MemoryFiles
from memlane.files.memory_snapshot import Snapshot
from memlane.types import Fact

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)


def fact(fact_id: str, text: str = "the gate code is 4451") -> Fact:
    return Fact(fact_id, "global", "global", "memory", text, MOMENT, MOMENT)


def test_front_matter_ids_as_the_reader_reads_them() -> None:
    assert front_matter_ids(b"---\nid: abc1\nrole: memory\n---\n\nx\n") == {"abc1"}
    assert front_matter_ids(b"---\nid: 'abc1'\nrole: memory\n---\nx\n") == {"abc1"}
    assert front_matter_ids(b"---\nid: abc1  # mine\n---\nx\n") == {"abc1", "abc1  # mine"}
    assert front_matter_ids(b"---\nid: 12345\n---\nx\n") == {"12345"}
    assert front_matter_ids(b"---\nid:\nrole: memory\n---\nx\n") is None
    assert front_matter_ids(b"---\nrole: memory\n---\nx\n") is None
    assert front_matter_ids(b"no front matter\nid: abc1\n") is None
    assert front_matter_ids(b"---\nid: abc1\nleft open\n") == {"abc1"}
    assert front_matter_ids(b"---\nid: abc1\nbad: [\n---\nx\n") == {"abc1"}  # YAML cannot
    assert ids_held(b"x\n", f"20260101T000000000000Z__{'a' * 8}.md") == {"a" * 8}


def test_a_renamed_file_is_found_through_the_snapshot_else_the_folder(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    written = files.write(fact("abc1"))
    moved = files.entries / "global" / "people" / "sister.md"
    moved.parent.mkdir()
    written.path.rename(moved)
    snapshot = Snapshot.load(tmp_path)
    snapshot.set(files.relative(moved), written.digest, "abc1")

    assert locate(files, [fact("abc1")], snapshot=snapshot).of("abc1") == [moved]
    assert locate(files, [fact("abc1")]).of("abc1") == [moved]  # no snapshot: the folder


def test_a_file_named_for_an_id_holds_whatever_its_front_matter_says(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    path = files.write(fact("abc1")).path
    path.write_text(path.read_text().replace("id: abc1", "id: other2"))

    assert locate(files, [fact("abc1")]).of("abc1") == []
    assert locate(files, [fact("other2")]).of("other2") == [path]


def test_every_file_is_looked_at_for_copies_anywhere(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    path = files.write(fact("abc1")).path
    copy = files.entries / "elsewhere" / "facts" / "copy.md"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(path.read_bytes())
    files.write(fact("kept1", "the shed is green"))

    assert locate(files, [fact("abc1")]).of("abc1") == [path]  # found by name: enough
    found = locate(files, [fact("abc1")], every=True)
    assert found.of("abc1") == sorted([path, copy])
    assert found.unread == []


def test_links_and_pipes_in_the_folder_are_passed_over_not_read(tmp_path: Path) -> None:
    """No entry is read through a link or from a pipe: a purge reading one would block on
    the pipe, or fail on a link it then counted as a file it could not read."""
    files = MemoryFiles(tmp_path)
    path = files.write(fact("abc1")).path
    outside = tmp_path.parent / f"{tmp_path.name}-outside.md"
    outside.write_bytes(path.read_bytes())  # a copy of the entry, outside the folder
    folder = path.parent
    (folder / "linked.md").symlink_to(outside)
    os.mkfifo(folder / "pipe.md")

    found = locate(files, [fact("abc1")], every=True)

    assert found.of("abc1") == [path]
    assert found.unread == []
