"""One way to replace a file: temp file in the folder, fsync, rename, fsync the folder."""

from __future__ import annotations

import ast
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.files.atomic import write_atomic, write_atomic_many
from tests.support.fsyncs import counted_fsyncs

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "memlane"


def test_replaces_the_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "folder" / "note.md"
    write_atomic(target, "first ✓")
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["note.md"]


def test_a_failed_replace_keeps_the_old_content_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a folder where the file should go: the rename fails
    (target / "inside").write_text("kept", encoding="utf-8")
    with pytest.raises(IsADirectoryError):
        write_atomic(target, "new")
    assert (target / "inside").read_text(encoding="utf-8") == "kept"
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


def test_many_files_are_replaced_together_and_leave_no_temporary_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "one.md", tmp_path / "b" / "two.md"
    write_atomic(first, "old")
    write_atomic_many([(first, b"new one"), (second, b"new two")])
    assert (first.read_bytes(), second.read_bytes()) == (b"new one", b"new two")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "one.md", "two.md"]


def test_folders_missing_or_removed_between_writes_are_made(tmp_path: Path) -> None:
    """A folder is made when a write finds it missing (not asked for before every write):
    one removed between two writes is made again, for one file or many."""
    one, many = tmp_path / "a" / "b" / "one.md", tmp_path / "c" / "d" / "two.md"
    write_atomic(one, "first")
    write_atomic_many([(many, b"first"), (tmp_path / "c" / "three.md", b"three")])
    for path in (one, many):
        path.unlink()
        path.parent.rmdir()
        path.parent.parent.joinpath("three.md").unlink(missing_ok=True)
        path.parent.parent.rmdir()
    write_atomic(one, "again")
    write_atomic_many([(many, b"again")])
    assert (one.read_text(encoding="utf-8"), many.read_bytes()) == ("again", b"again")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "c", "d", "one.md", "two.md"]


def test_many_files_failing_midway_keep_every_old_content_and_clean_up(tmp_path: Path) -> None:
    """A rename that fails leaves its file and every later one as they were, and no
    temporary file behind (those before it are in place: each is whole)."""
    first, taken, third = tmp_path / "one.md", tmp_path / "taken", tmp_path / "three.md"
    write_atomic(third, "old three")
    taken.mkdir()  # a folder where the file should go: its rename fails
    with pytest.raises(IsADirectoryError):
        write_atomic_many([(first, b"one"), (taken, b"two"), (third, b"new three")])
    assert first.read_bytes() == b"one"
    assert third.read_bytes() == b"old three"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.md", "taken", "three.md"]


def test_mode_applies_before_the_file_has_its_name(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    write_atomic(secret, "s3cret", mode=0o600)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    plain, ordinary = tmp_path / "plain", tmp_path / "ordinary"
    write_atomic(plain, "x")
    with open(ordinary, "w", encoding="utf-8"):  # what any new file gets under this umask
        pass
    assert stat.S_IMODE(plain.stat().st_mode) == stat.S_IMODE(ordinary.stat().st_mode)


REPLACING_CALLS = {"write_text", "write_bytes", "rename"}
"""Path methods that replace a file in place (half-written on a crash)."""


def _replacing_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        target = node.func.value
        on_os = isinstance(target, ast.Name) and target.id == "os"
        if name in REPLACING_CALLS or (on_os and name in ("replace", "rename")):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    return found


def test_every_file_memlane_replaces_goes_through_write_atomic() -> None:
    offenders = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "files" / "atomic.py"
        for call in _replacing_calls(path)
    ]
    assert offenders == []


def test_a_write_that_need_not_be_durable_syncs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = counted_fsyncs(monkeypatch)
    target = tmp_path / "todo.md"
    write_atomic(target, "- [ ] again next request", durable=False)
    assert target.read_text(encoding="utf-8") == "- [ ] again next request"
    assert synced == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["todo.md"]
    write_atomic(target, "- [x] set by the user")
    assert len(synced) == 2  # the file, then its folder


def test_chunks_are_written_in_turn_and_their_size_returned(tmp_path: Path) -> None:
    target = tmp_path / "big.json"
    target.write_text("old")
    assert write_atomic(target, (b"%d," % n for n in range(1_000))) == 3_890
    assert target.read_bytes() == b"".join(b"%d," % n for n in range(1_000))
    assert write_atomic(target, "é") == 2  # text as UTF-8, as before


def test_chunks_failing_midway_keep_the_old_content_and_clean_up(tmp_path: Path) -> None:
    target = tmp_path / "big.json"
    target.write_text("old")

    def chunks() -> Iterator[bytes]:
        yield b"half"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, chunks())
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json"]
