"""What a commit of a person's changes says (`HandChanges.message`)."""

from __future__ import annotations

from memlane.engine.memory.book.hand_edits import LISTED, HandChanges


def test_one_kind_of_change_names_it() -> None:
    assert HandChanges(edited=["a.md"]).message() == "memory: 1 file edited by hand\n\nedited: a.md"
    assert (
        HandChanges(removed=["a.md", "b.md"])
        .message()
        .startswith("memory: 2 files removed by hand\n\nremoved: a.md\nremoved: b.md")
    )
    assert HandChanges(skipped=["a.md"]).message() == (
        "memory: 1 file changed by hand, not indexed\n\nnot indexed: a.md"
    )


def test_several_kinds_are_counted_each() -> None:
    changes = HandChanges(added=["n.md"], edited=["e.md"], skipped=["s.md", "t.md"])
    assert len(changes) == 4
    assert changes.message().splitlines()[0] == (
        "memory: 4 files changed by hand (1 added, 1 edited, 2 not indexed)"
    )


def test_a_long_batch_lists_the_first_files_and_how_many_more() -> None:
    changes = HandChanges(added=[f"{n}.md" for n in range(LISTED + 7)])
    lines = changes.message().splitlines()
    assert lines[0] == f"memory: {LISTED + 7} files added by hand"
    assert lines[2 : 2 + LISTED] == [f"added: {n}.md" for n in range(LISTED)]
    assert lines[-1] == "… and 7 more"
