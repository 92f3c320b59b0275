"""What a file must be to be read as a memory: its id, its scope, a regular file inside
the memory folder, not too big."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.engine.memory.turn_input import TRUNCATED_MARKER
from memlane.files.memory_checks import MAX_ENTRY_BYTES, max_entry_bytes, valid_id
from memlane.files.memory_files import MemoryFileError, MemoryFiles, _path_id, new_id, parse
from memlane.files.memory_render import render
from memlane.types import Citations, CitedFile, Fact

WHEN = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def entry(**changes: object) -> Fact:
    base: dict[str, object] = {
        "id": "abc123",
        "scope": "global",
        "conversation_id": "s1",
        "role": "memory",
        "text": "The user likes limes",
        "created_at": WHEN,
        "updated_at": WHEN,
    }
    base.update(changes)
    return Fact(**base)  # type: ignore[arg-type]


def parsed(head: str) -> Fact:
    return parse(
        f"---\n{head}---\n\nThe user likes limes\n",
        path=Path("entries/global/facts/hand.md"),
        scope_hint="global",
        role_hint="memory",
        deleted=False,
        mtime=WHEN,
    )


def facts_folder(root: Path) -> Path:
    folder = root / "entries" / "global" / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


BAD_IDS = [
    "../../../../../../tmp/qa-evil3",
    "a/b",
    "..",
    ".hidden",
    "-rf",
    "*",
    "x?",
    "[ab]",
    "two words",
    "ünïcode",
    "x" * 129,
]


@pytest.mark.parametrize("value", BAD_IDS)
def test_an_id_written_in_a_file_must_be_a_memory_id(value: str) -> None:
    with pytest.raises(MemoryFileError, match=r"hand.md: id .* is not a memory id"):
        parsed(f"id: '{value}'\n")


@pytest.mark.parametrize("field", ["replaced_by", "supersedes"])
def test_the_ids_a_file_links_to_are_memory_ids_too(field: str) -> None:
    with pytest.raises(MemoryFileError, match=rf"{field} .* is not a memory id"):
        parsed(f"id: abc123\n{field}: ../../x\n")
    with pytest.raises(MemoryFileError, match=r"source_turns .* is not a memory id"):
        parsed("id: abc123\nsource_turns:\n- ok1\n- ../x\n")


def test_every_id_memlane_mints_or_reads_is_one() -> None:
    for value in [new_id(), _path_id(Path("note.md")), "abc123", "x", "t1", "my-note_1.v2"]:
        assert valid_id(value), value
        assert parsed(f"id: {value}\n").id == value


def test_no_path_is_built_from_an_id_that_is_not_one(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    evil = entry(id="../../../../outside/evil")
    with pytest.raises(ValueError, match="not a memory id"):
        files.path_for(evil)
    with pytest.raises(ValueError, match="not a memory id"):
        files.write(evil)
    with pytest.raises(ValueError, match="not a memory id"):
        files.find(entry(id="*"))  # a glob would match any file
    assert not list(tmp_path.rglob("*.md"))


def test_a_scope_written_in_a_file_follows_the_scope_grammar(tmp_path: Path) -> None:
    for scope in ["wizard", "ns:", "conv: ", "t:nothex:ns:x", "global2"]:
        with pytest.raises(MemoryFileError, match="invalid scope"):
            parsed(f"id: abc123\nscope: '{scope}'\n")
    # a namespace may hold any text (a repository's path): its folder is made safe
    odd = parsed("id: abc123\nscope: ns:../../etc\n")
    assert odd.scope == "ns:../../etc"
    files = MemoryFiles(tmp_path)
    written = files.write(odd).path
    assert written.parent.parent.parent == files.entries
    assert files.read(written).fact.scope == "ns:../../etc"


def test_a_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    files = MemoryFiles(tmp_path / "memory")
    link = facts_folder(files.root) / "passwd.md"
    link.symlink_to(secret)
    assert list(files.scan()) == [link]  # listed, so reading it says why it is skipped
    with pytest.raises(MemoryFileError, match=r"passwd.md: is a symbolic link"):
        files.read(link)
    dangling = link.with_name("gone.md")
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(MemoryFileError, match=r"gone.md: is a symbolic link"):
        files.read(dangling)


def test_a_file_in_a_folder_outside_the_memory_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "note.md").write_text("id: abc123\n\nThe user likes limes\n")
    files = MemoryFiles(tmp_path / "memory")
    (facts_folder(files.root) / "linked").symlink_to(outside, target_is_directory=True)
    linked = files.entries / "global" / "facts" / "linked"
    with pytest.raises(MemoryFileError, match=r"linked, which leads outside the memory folder"):
        files.read(linked / "note.md")
    with pytest.raises(MemoryFileError, match="lies outside the memory folder"):
        files.read(outside / "note.md")


def test_a_named_pipe_is_not_read_and_does_not_block(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    pipe = facts_folder(tmp_path) / "pipe.md"
    os.mkfifo(pipe)
    with pytest.raises(MemoryFileError, match=r"pipe.md: is not a regular file"):
        files.read(pipe)


def test_a_file_bigger_than_an_entry_memlane_writes_is_not_read(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path, max_bytes=1_000)
    big = facts_folder(tmp_path) / "big.md"
    big.write_text("x" * 1_001)
    with pytest.raises(MemoryFileError, match=r"big\.md: 1,001 bytes, more than the 1,000"):
        files.read(big)
    big.write_text("x" * 1_000)
    assert files.read(big).fact.text == "x" * 1_000


def test_the_bound_holds_the_largest_entry_memlane_writes(tmp_path: Path) -> None:
    """A remembered turn is cut to `memory_message_chars` (64,000 by default) and marked;
    at 4 bytes a character, with cited files in its front matter, it still fits."""
    cut = "𝄞" * 64_000 + TRUNCATED_MARKER.format(left=10**9, limit=64_000)
    cites = Citations(
        root="/home/someone/" + "p" * 200,
        head="f" * 40,
        noted_at=WHEN,
        files=tuple(CitedFile(path="d/" * 100 + f"f{n}.py", blob="b" * 64) for n in range(8)),
    )
    turn = entry(id=new_id(), role="user", text=cut, cites=cites, source_session="s" * 200)
    assert len(render(turn).encode()) <= MAX_ENTRY_BYTES
    files = MemoryFiles(tmp_path)
    assert files.read(files.write(turn).path).fact.text == cut
    # a home that keeps longer messages reads longer entries
    assert max_entry_bytes(1_000_000) > 4_000_000 > MAX_ENTRY_BYTES
