"""A session's state files: only what is there is read, escapes normalised."""

from __future__ import annotations

from pathlib import Path

from memlane.files.scaffold import MAX_FILE_BYTES, FileTexts, read_text


def test_reading_finds_exactly_the_files_that_exist(tmp_path: Path) -> None:
    texts = FileTexts(tmp_path / "sessions")
    assert texts.read("never-seen") == {}  # no folder yet

    texts.write("s", "todo", "1. a\\n2. b")
    assert texts.read("s") == {"todo": "1. a\n2. b"}

    texts.write("s", "pinned", "keep it short")
    texts.write("s", "spec_approved", "1")
    assert texts.read("s") == {
        "todo": "1. a\n2. b",
        "pinned": "keep it short",
        "spec_approved": "1",
    }

    texts.write("s", "todo", None)
    assert texts.read("s") == {"pinned": "keep it short", "spec_approved": "1"}


def test_a_file_where_the_folder_should_be_reads_as_nothing(tmp_path: Path) -> None:
    texts = FileTexts(tmp_path / "sessions")
    folder = texts.folder("s")
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder")
    assert texts.read("s") == {}


def test_a_pasted_log_is_read_up_to_the_cap_and_odd_files_as_nothing(tmp_path: Path) -> None:
    texts = FileTexts(tmp_path / "sessions")
    texts.write("s", "pinned", "short")
    folder = texts.folder("s")
    (folder / "todo.md").write_bytes(b"x" * (MAX_FILE_BYTES + 10))
    (folder / "summary.md").mkdir()  # a folder where a file should be
    read = texts.read("s")
    assert read == {"pinned": "short", "todo": "x" * MAX_FILE_BYTES}
    (folder / "pinned.md").write_bytes(b"caf\xc3\xa9 \xff")  # not UTF-8 at its end
    assert texts.read("s")["pinned"] == "café \ufffd"
    assert read_text(folder / "missing.md") is None
