"""`files.git_purge`: a purged entry leaves no text it ever had in any git object.

The repositories here are written as memlane writes its memory (an entry file per id,
commit messages that quote the texts), then purged the way the engine does it: while
the entry's file is still on disk, which the caller removes afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.files.git import GitRepo
from memlane.files.git_purge import PurgeError, purge_history
from memlane.files.memory_files import entry_text
from tests.support.gitrepo import every_object, failing_purge_git, git

DOOMED = "20260101T000000000000Z__doomed1.md"
KEPT = "20260101T000000000001Z__kept1.md"
FACTS = Path("entries/global/facts")


def entry(fact_id: str, text: str) -> str:
    return f"---\nid: {fact_id}\nrole: memory\nscope: global\n---\n\n{text}\n"


def commit(repo: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        path = repo / FACTS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-q", "-m", message)


def left_anywhere(repo: Path, text: str) -> list[str]:
    """Where `text` is still found in the repository's git: patches, messages, objects."""
    places = {
        "a patch": git(repo, "log", "--all", "-p", "--format="),
        "a message": git(repo, "log", "--all", "--format=%B"),
    }
    found = [where for where, seen in places.items() if text in seen]
    return found + (["an object"] if text.encode() in every_object(repo) else [])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A memory whose doomed entry was added, then edited in place (same id, new text)."""
    folder = tmp_path / "memory"
    folder.mkdir()
    git(folder, "init", "-q")
    commit(
        folder,
        {DOOMED: entry("doomed1", "alarm code ALPHA-111")},
        "memory: added\n\n+ alarm code ALPHA-111",
    )
    commit(
        folder,
        {KEPT: entry("kept1", "shed code KEPT-333")},
        "memory: added\n\n+ shed code KEPT-333",
    )
    commit(
        folder,
        {DOOMED: entry("doomed1", "alarm code BRAVO-222")},
        "memory: edited doomed1\n\n- alarm code ALPHA-111\n+ alarm code BRAVO-222",
    )
    return folder


def test_an_edited_entry_leaves_neither_its_old_nor_its_new_text(repo: Path) -> None:
    """The caller knows only the current text; the earlier one comes from the history."""
    report = purge_history(
        repo, ["doomed1"], ["alarm code BRAVO-222"], message="memory: purged doomed1"
    )
    (repo / FACTS / DOOMED).unlink()  # the caller removes the file once the history is clean

    assert left_anywhere(repo, "ALPHA-111") == []
    assert left_anywhere(repo, "BRAVO-222") == []
    assert report.files_dropped == 2
    assert report.messages_scrubbed == 2
    assert "- [purged]\n+ [purged]" in git(repo, "log", "--all", "--format=%B")
    assert left_anywhere(repo, "KEPT-333")  # the other entry is kept, with its message
    assert git(repo, "log", "-1", "--format=%s") == "memory: purged doomed1"
    assert git(repo, "status", "--porcelain") == ""


def test_a_hand_edited_files_earlier_text_is_purged(repo: Path) -> None:
    """A person's edit keeps the id and changes the text; the first message quoted it."""
    commit(
        repo,
        {DOOMED: entry("doomed1", "alarm code CHARLIE-444")},
        "memory: 1 file(s) edited by hand",
    )
    broken = "---\nid: doomed1\nalarm code DELTA-555 (front matter left open)\n"
    commit(repo, {DOOMED: broken}, "memory: 1 file(s) edited by hand")
    purge_history(repo, ["doomed1"], [])  # nothing known of it but its id
    (repo / FACTS / DOOMED).unlink()

    for text in ("ALPHA-111", "BRAVO-222", "CHARLIE-444", "DELTA-555"):
        assert left_anywhere(repo, text) == [], text
    assert left_anywhere(repo, "KEPT-333")


def test_a_purge_whose_rewrite_fails_changes_nothing_and_runs_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    with monkeypatch.context() as patched:
        failing_purge_git(tmp_path / "bin", patched)
        with pytest.raises(PurgeError, match="fast-import"):
            purge_history(repo, ["doomed1"], ["alarm code BRAVO-222"])
    assert git(repo, "rev-parse", "HEAD") == head
    assert str(FACTS / DOOMED) in git(repo, "ls-files")
    assert git(repo, "status", "--porcelain") == ""

    purge_history(repo, ["doomed1"], ["alarm code BRAVO-222"])  # the same purge again
    (repo / FACTS / DOOMED).unlink()
    assert left_anywhere(repo, "ALPHA-111") == []
    assert left_anywhere(repo, "BRAVO-222") == []


def test_without_git_a_purge_fails_as_when_git_does(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PurgeError, match="cannot run git"):
        purge_history(repo, ["doomed1"], [])


def test_an_earlier_text_too_short_to_tell_apart_is_not_scrubbed(repo: Path) -> None:
    commit(repo, {DOOMED: entry("doomed1", "ok")}, "memory: edited doomed1\n\n+ ok")
    commit(repo, {"notes.md": "x"}, "ok then, a note")
    purge_history(repo, ["doomed1"], [])
    (repo / FACTS / DOOMED).unlink()
    messages = git(repo, "log", "--all", "--format=%B")
    assert "ok then, a note" in messages  # a word of other messages stays as it was
    assert left_anywhere(repo, "ALPHA-111") == []


def test_an_entrys_text_is_its_body_whatever_its_front_matter() -> None:
    assert entry_text(entry("x", "  the text \n").encode()) == "the text"
    assert entry_text(b"\xef\xbb\xbf---\nid: x\n---\nbody\n") == "body"
    assert entry_text(b"no front matter\n") == "no front matter"
    assert entry_text(b"---\nid: [unclosed\nbody\n") == "---\nid: [unclosed\nbody"


async def test_a_text_with_a_nul_is_purged_from_the_messages_that_quoted_it(
    tmp_path: Path,
) -> None:
    """Messages hold a memory's NUL as U+FFFD (`git_import.commit_message`): the purge
    looks for the text in that form too."""
    folder = tmp_path / "memory"
    text = "the modem sends nul\x00bytes at boot"
    repo = GitRepo(folder)
    await repo.ensure()
    (folder / FACTS).mkdir(parents=True)
    (folder / FACTS / DOOMED).write_text(entry("doomed1", text.replace("\x00", "")))
    assert await repo.commit(f"memory: added\n\n+ {text}")
    assert "nul\ufffdbytes" in git(folder, "log", "--format=%B")

    purge_history(folder, ["doomed1"], [text])
    assert "bytes at boot" not in git(folder, "log", "--all", "--format=%B")


def move(repo: Path, old: Path, new: Path, text: str | None = None) -> None:
    """A person's rename (or move), the text edited in the same commit when given."""
    (repo / new).parent.mkdir(parents=True, exist_ok=True)
    (repo / old).rename(repo / new)
    if text is not None:
        (repo / new).write_text(text)
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-q", "-m", "memory: 1 file(s) edited by hand")


def test_a_file_renamed_by_hand_is_purged_under_every_name_it_had(repo: Path) -> None:
    """Renamed, then moved to another folder with its text changed in the same commit (no
    blob in common): only the front matter's id says it is the same memory."""
    renamed = FACTS / "sœur.md"  # a name fast-export quotes
    move(repo, FACTS / DOOMED, renamed)
    moved = Path("entries/global/people/sister.md")
    move(repo, renamed, moved, entry("doomed1", "alarm code ECHO-666"))

    report = purge_history(repo, ["doomed1"], [], message="memory: purged doomed1")
    (repo / moved).unlink()

    for text in ("ALPHA-111", "BRAVO-222", "ECHO-666"):
        assert left_anywhere(repo, text) == [], text
    assert report.files_dropped == 6  # added, edited, renamed and moved (2 changes each)
    assert left_anywhere(repo, "KEPT-333")
    assert git(repo, "status", "--porcelain") == ""


def test_a_file_whose_id_a_person_changed_goes_with_its_earlier_versions(repo: Path) -> None:
    """`id: kept1` became `id: handmade`: the file named for kept1 is handmade's, and
    what it held before is that memory's earlier text."""
    commit(repo, {KEPT: entry("handmade", "shed code FOXTROT-777")}, "memory: edited by hand")
    purge_history(repo, ["handmade"], [])
    (repo / FACTS / KEPT).unlink()

    assert left_anywhere(repo, "KEPT-333") == []
    assert left_anywhere(repo, "FOXTROT-777") == []
    assert left_anywhere(repo, "ALPHA-111")  # another memory's file stays


def test_a_renamed_file_only_staged_leaves_the_index_and_the_objects(repo: Path) -> None:
    (repo / FACTS / KEPT).rename(repo / FACTS / "shed.md")
    git(repo, "add", "-A", ".")  # staged, never committed under the new name
    (repo / FACTS / "shed.md").write_text(entry("kept1", "shed code GOLF-888"))
    git(repo, "add", "-A", ".")
    purge_history(repo, ["kept1"], [])
    (repo / FACTS / "shed.md").unlink()

    assert left_anywhere(repo, "GOLF-888") == []
    assert left_anywhere(repo, "KEPT-333") == []
    assert git(repo, "status", "--porcelain") == ""


def test_a_version_git_cannot_read_stops_the_purge_before_it_changes_anything(
    repo: Path,
) -> None:
    kept = git(repo, "rev-parse", f"HEAD:{FACTS / KEPT}")
    (repo / ".git" / "objects" / kept[:2] / kept[2:]).unlink()
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(PurgeError, match=r"cannot read 1 version.*kept1\.md"):
        purge_history(repo, ["doomed1"], [])
    assert git(repo, "rev-parse", "HEAD") == head
