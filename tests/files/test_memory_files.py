"""The Markdown tree: layout, format, atomic writes, soft deletes, bad files."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from memlane.files.memory_files import MemoryFileError, MemoryFiles, id_from_name, parse
from memlane.files.memory_render import render
from memlane.types import Citations, CitedFile, Fact

WHEN = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def fact(**changes: object) -> Fact:
    base: dict[str, object] = {
        "id": "abc123",
        "scope": "ns:repo",
        "conversation_id": "s1",
        "role": "memory",
        "text": "The user's wife is named Anne",
        "created_at": WHEN,
        "updated_at": WHEN,
        "source_session": "s1",
        "source_message": 7,
    }
    base.update(changes)
    return Fact(**base)  # type: ignore[arg-type]


def test_layout_follows_scope_role_and_timestamp(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    path = files.write(fact()).path
    rel = path.relative_to(tmp_path).as_posix()
    assert rel.startswith("entries/ns_repo-")
    assert rel.endswith("/facts/20240508T135600000000Z__abc123.md")
    turn = files.write(fact(id="t1", role="user", scope="global")).path
    assert turn.relative_to(tmp_path).as_posix() == (
        "entries/global/turns/user/20240508T135600000000Z__t1.md"
    )
    assert id_from_name(turn.name) == "t1"


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    original = fact(summary_kind=None, replaced_by=None)
    written = files.write(original)
    assert files.read(written.path).fact == original
    text = written.path.read_text()
    assert text.startswith("---\nid: abc123\nrole: memory\n")
    assert text.endswith("---\n\nThe user's wife is named Anne\n")


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    files.write(fact())
    files.write(fact(text="changed"))
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert [files.read(p).fact.text for p in files.scan()] == ["changed"]


def test_soft_delete_moves_the_file_under_deleted(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    active = files.write(fact()).path
    tomb = files.move_to_deleted(fact(), replaced_by="new1").path
    assert not active.exists()
    assert "/deleted/facts/" in tomb.as_posix()
    read = files.read(tomb).fact
    assert read.deleted
    assert read.replaced_by == "new1"
    assert read.text == "The user's wife is named Anne"


def test_a_hand_written_file_without_front_matter_takes_its_place(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    files.write(fact())  # creates the scope folder and its .scope marker
    folder = files.scope_dir("ns:repo") / "facts"
    hand = folder / "my-note.md"
    hand.write_text("The user prefers tabs over spaces\n")
    read = files.read(hand).fact
    assert (read.scope, read.role, read.deleted) == ("ns:repo", "memory", False)
    assert read.text == "The user prefers tabs over spaces"
    assert read.id  # derived from the file name, stable
    assert files.read(hand).fact.id == read.id


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("---\nid: [unclosed\n---\ntext\n", "not valid YAML"),
        ("---\nid: x\nrole: memory\n", "not closed"),
        ("---\n- a list\n---\ntext\n", "mapping"),
        ("---\nid: x\nrole: wizard\n---\ntext\n", "role must be"),
        ("---\nid: x\ncreated_at: yesterday\n---\ntext\n", "ISO 8601"),
        ("---\nid: x\n---\n\n", "empty memory"),
        ("---\nid: x\nsource_turns: t1\n---\ntext\n", "source_turns must be a list"),
        ("---\nid: x\nsource_turns: [1, 2]\n---\ntext\n", "source_turns must be a list"),
    ],
)
def test_broken_files_raise_a_clear_error(content: str, why: str) -> None:
    with pytest.raises(MemoryFileError, match=why):
        parse(
            content,
            path=Path("entries/global/facts/x.md"),
            scope_hint="global",
            role_hint="memory",
            deleted=False,
            mtime=WHEN,
        )


def test_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    bad = tmp_path / "entries" / "global" / "facts" / "bad.md"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\xff\xfe\x00broken")
    with pytest.raises(MemoryFileError, match="not UTF-8"):
        files.read(bad)


def test_render_escapes_nothing_a_reader_needs() -> None:
    text = render(fact(text="Line one\n---\nline three"))
    parsed = parse(
        text,
        path=Path("x__abc123.md"),
        scope_hint=None,
        role_hint=None,
        deleted=False,
        mtime=WHEN,
    )
    assert parsed.text == "Line one\n---\nline three"


def test_validity_and_links_are_front_matter(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    start, end = datetime(2026, 1, 15, 9, 0, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC)
    closed = fact(valid_from=start, valid_to=end, replaced_by="n2", created_at=start)
    written = files.write(closed)
    text = written.path.read_text()
    assert "valid_from: '2026-01-15T09:00:00+00:00'" in text
    assert "valid_to: '2026-03-10T00:00:00+00:00'" in text
    assert "replaced_by: n2" in text
    assert "/deleted/" not in written.path.as_posix()  # closed is not deleted
    assert files.read(written.path).fact == closed
    successor = fact(id="n2", valid_from=end, supersedes="abc123")
    assert files.read(files.write(successor).path).fact == successor
    assert "valid_" not in render(fact())  # no interval given: none written


def test_a_hand_written_valid_to_is_read_and_a_backwards_one_refused(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    path = files.write(fact()).path
    path.write_text(path.read_text().replace("updated_at:", "valid_to: 2024-06-01\nupdated_at:"))
    assert files.read(path).fact.valid_to == datetime(2024, 6, 1, tzinfo=UTC)
    path.write_text(path.read_text().replace("valid_to: 2024-06-01", "valid_to: 2020-01-01"))
    with pytest.raises(MemoryFileError, match="valid_to is before"):
        files.read(path)
    path.write_text(path.read_text().replace("valid_to: 2020-01-01", "valid_to: soon"))
    with pytest.raises(MemoryFileError, match="valid_to is not an ISO 8601 time"):
        files.read(path)


def test_the_turns_a_fact_came_from_are_front_matter_until_it_is_deleted(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    linked = fact(source_turns=("t1", "t2"))
    written = files.write(linked)
    assert "source_turns:\n- t1\n- t2\n" in written.path.read_text()
    assert files.read(written.path).fact == linked
    assert "source_turns" not in render(fact())  # none: nothing written
    tomb = files.move_to_deleted(linked)
    assert "source_turns" not in tomb.path.read_text()
    assert files.read(tomb.path).fact.source_turns == ()
    # a tombstone a person wrote with links still links nothing
    tomb.path.write_text(
        tomb.path.read_text().replace("id: abc123", "id: abc123\nsource_turns: [t1]")
    )
    assert files.read(tomb.path).fact.source_turns == ()


CITES = Citations(
    root="/home/u/src/api",
    files=(
        CitedFile("conf/app.toml", "git:" + "a" * 40),
        CitedFile("notes.txt", "sha256:" + "b" * 64),
    ),
    noted_at=WHEN,
    head="c" * 40,
)


def test_the_files_a_memory_cites_are_front_matter_a_person_reads(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    citing = fact(cites=CITES)
    written = files.write(citing)
    text = written.path.read_text()
    assert "cites:\n  root: /home/u/src/api\n" in text
    assert "  - path: conf/app.toml\n    blob: git:" in text
    assert files.read(written.path).fact == citing
    assert "cites" not in render(fact())


def test_cites_a_person_broke_is_a_clear_error() -> None:
    with pytest.raises(MemoryFileError, match="cites must hold root"):
        parse(
            "---\nid: x\ncites:\n  root: /r\n  files: conf/app.toml\n---\ntext\n",
            path=Path("entries/global/facts/x.md"),
            scope_hint="global",
            role_hint="memory",
            deleted=False,
            mtime=WHEN,
        )


LOOK_ALIKES = [
    "abc123", "1234", "123abc", "yes", "Yes", "NO", "on", "off", "null", "Null", "true",
    "1e5", "1.5", "0x1F", "0o17", "1_000", "1:20", "190:20:30", "a:b", "conv:s1",
    "t:acme:ns:repo", "abc:", "2024-05-08", "2024-05-08T13:56:00+00:00", "_x", "x-y",
    "a/b", "http://x", "a@b", "x+y", ".inf", "a.b.c", "0", "00", "9" * 40,
]  # fmt: skip


@pytest.mark.parametrize("value", LOOK_ALIKES)
def test_front_matter_is_what_yaml_writes_for_any_plain_value(value: str) -> None:
    """The front matter is written without PyYAML's representer for plain values: the
    bytes must be PyYAML's to the letter (quoted where a value would read as a number, a
    time or a boolean), so files stay the same whoever wrote them."""
    entry = fact(id=value, scope=value, conversation_id=value, source_session=value, role="user")
    meta = {
        "id": value,
        "role": "user",
        "scope": value,
        "conversation_id": value,
        "created_at": WHEN.isoformat(),
        "updated_at": WHEN.isoformat(),
        "source_session": value,
        "source_message": 7,
    }
    head = yaml.dump(meta, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True)
    assert render(entry) == f"---\n{head}---\n\nThe user's wife is named Anne\n"
    readable = replace(entry, id="abc123", scope="global")  # a file's id and scope are checked
    read = parse(
        render(readable),
        path=Path("x.md"),
        scope_hint=None,
        role_hint=None,
        deleted=False,
        mtime=WHEN,
    )
    assert (read.conversation_id, read.source_session) == (value, value)


@pytest.mark.parametrize("value", LOOK_ALIKES)
def test_a_facts_source_turns_are_what_yaml_writes_for_a_list(value: str) -> None:
    """A fact's `source_turns` (a list) is written without PyYAML's representer too, as
    PyYAML writes a block list, each item as it writes that value alone."""
    entry = fact(id="f1", source_turns=(value, "0a1b2c", "t2"))
    head = render(entry).split("---\n")[1]
    meta = yaml.safe_load(head)
    assert meta["source_turns"] == [value, "0a1b2c", "t2"]
    assert head == yaml.dump(meta, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True)


@pytest.mark.parametrize("value", ["two words", "it's", "a: b", "#tag", "-x", "ünïcode"])
def test_a_list_holding_a_value_yaml_must_quote_is_written_by_yaml(value: str) -> None:
    entry = fact(id="f1", source_turns=("t1", value))
    head = render(entry).split("---\n")[1]
    assert yaml.safe_load(head)["source_turns"] == ["t1", value]
    assert head == yaml.dump(yaml.safe_load(head), sort_keys=False, allow_unicode=True)


@pytest.mark.parametrize("value", ["two words", "ünïcode", "it's", "a: b", "#tag", "-x", ""])
def test_values_yaml_must_quote_or_escape_are_written_by_yaml(value: str) -> None:
    text = render(fact(source_session=value or None, conversation_id=value or "s1"))
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["conversation_id"] == (value or "s1")
