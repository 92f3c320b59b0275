"""The snapshot journal: a save costs what changed, not the whole memory, and several
processes saving one file keep each other's changes."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path

import pytest

from memlane.files import memory_snapshot
from memlane.files.memory_snapshot import SNAPSHOT_FILE, Snapshot


def lines(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (root / SNAPSHOT_FILE).read_bytes().splitlines()]


def filled(root: Path, count: int) -> Snapshot:
    snap = Snapshot.load(root)
    for n in range(count):
        snap.set(f"entries/global/turns/user/{n}.md", f"h{n}", f"id{n}")
    snap.save()
    return snap


def test_a_save_appends_only_what_changed(tmp_path: Path) -> None:
    snap = filled(tmp_path, 2000)
    before = (tmp_path / SNAPSHOT_FILE).stat().st_size
    snap.set("entries/global/turns/user/new.md", "hn", "new")
    snap.pop("entries/global/turns/user/7.md")
    snap.save()
    written = lines(tmp_path)
    assert len(written[0]) == 2000  # the whole snapshot, written once
    assert written[1:] == [
        {
            "entries/global/turns/user/new.md": {"hash": "hn", "id": "new"},
            "entries/global/turns/user/7.md": None,
        }
    ]
    assert (tmp_path / SNAPSHOT_FILE).stat().st_size - before < 200
    again = Snapshot.load(tmp_path)
    assert len(again) == 2000
    assert again.get("entries/global/turns/user/7.md") is None
    seen = again.get("entries/global/turns/user/new.md")
    assert seen is not None
    assert (seen.digest, seen.fact_id) == ("hn", "new")


def test_a_save_with_nothing_changed_writes_nothing(tmp_path: Path) -> None:
    snap = filled(tmp_path, 3)
    before = (tmp_path / SNAPSHOT_FILE).stat()
    snap.save()
    after = (tmp_path / SNAPSHOT_FILE).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_journal_is_folded_in_once_it_outgrows_the_snapshot(tmp_path: Path) -> None:
    snap = filled(tmp_path, 10)
    for n in range(memory_snapshot.REWRITE_AT_LEAST + 1):
        snap.set(f"entries/global/turns/user/{n % 10}.md", f"v{n}", f"id{n % 10}")
        snap.save()
    written = lines(tmp_path)
    assert len(written) < memory_snapshot.REWRITE_AT_LEAST  # rewritten whole on the way
    assert Snapshot.load(tmp_path).get("entries/global/turns/user/0.md") == snap.get(
        "entries/global/turns/user/0.md"
    )


def test_processes_appending_keep_each_others_changes(tmp_path: Path) -> None:
    one, two = Snapshot.load(tmp_path), Snapshot.load(tmp_path)
    one.set("a.md", "h1", "a")
    one.save()
    two.set("b.md", "h2", "b")
    two.save()  # after the first's whole write: appends
    one.set("c.md", "h3", "c")
    one.save()  # takes in the second's line first
    assert len(lines(tmp_path)) == 3  # each save after the first appended its change
    assert sorted(one.paths()) == ["a.md", "b.md", "c.md"]
    assert sorted(Snapshot.load(tmp_path).paths()) == ["a.md", "b.md", "c.md"]


def test_a_line_torn_by_a_crash_is_skipped_and_the_file_written_whole(tmp_path: Path) -> None:
    snap = filled(tmp_path, 3)
    snap.set("later.md", "hl", "later")
    snap.save()
    with open(tmp_path / SNAPSHOT_FILE, "ab") as handle:
        handle.write(b'{"torn.md":{"hash":"h')  # the process died mid-write
    reopened = Snapshot.load(tmp_path)
    assert sorted(reopened.paths())[-1] == "later.md"
    assert reopened.get("torn.md") is None
    reopened.set("next.md", "hx", "next")
    reopened.save()
    assert len(lines(tmp_path)) == 1  # whole again: no append after a torn line
    assert Snapshot.load(tmp_path).get("next.md") is not None


def test_the_single_object_layout_still_reads(tmp_path: Path) -> None:
    old = {"a.md": {"hash": "h1", "id": "a"}, "b.md": {"hash": "h2", "id": "b"}}
    (tmp_path / SNAPSHOT_FILE).write_text(json.dumps(old, indent=0))
    snap = Snapshot.load(tmp_path)
    assert snap.loaded
    assert sorted(snap.paths()) == ["a.md", "b.md"]
    snap.set("c.md", "h3", "c")
    snap.save()
    assert lines(tmp_path) == [{**old, "c.md": {"hash": "h3", "id": "c"}}]


def test_an_entry_is_kept_compact_and_read_back_exactly(tmp_path: Path) -> None:
    """A busy proxy keeps two entries a turn for good: each holds one bytes object (the
    hash's 32 bytes and the id) in memory, not a `Seen` and two strings, and reads back,
    saves and loads as it was given, a hash that is no SHA-256 hex digest included."""
    paths = [f"entries/global/turns/user/{n:05}__{n:032x}.md" for n in range(2_000)]
    snap = Snapshot.load(tmp_path)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for n, rel in enumerate(paths):  # each file's hash made as the book makes it
            snap.set(rel, hashlib.sha256(str(n).encode()).hexdigest(), f"{n:032x}")
        snap.save()  # the changes saved: what stays is the copy in memory
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert held / len(paths) < 200  # a Seen and its two strings took 263 bytes
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(2_000)]
    snap.set("entries/global/edited.md", "ABC", "é-id")  # not a lower-case digest: kept as is
    assert snap.get(paths[7]) == memory_snapshot.Seen(digests[7], f"{7:032x}")
    assert snap.get("entries/global/edited.md") == memory_snapshot.Seen("ABC", "é-id")
    assert snap.paths_of(f"{9:032x}") == [paths[9]]
    assert snap.paths_of("é-id") == ["entries/global/edited.md"]
    snap.save()
    again = Snapshot.load(tmp_path)
    assert again.get(paths[1_999]) == memory_snapshot.Seen(digests[1_999], f"{1_999:032x}")
    assert again.get("entries/global/edited.md") == memory_snapshot.Seen("ABC", "é-id")
    assert again.pop(paths[3]) == memory_snapshot.Seen(digests[3], f"{3:032x}")


def test_a_whole_rewrite_is_written_a_chunk_at_a_time_as_one_json_object(
    tmp_path: Path,
) -> None:
    """Built whole, the snapshot's line took about 850 B an entry at once (68 MB at 80,000
    entries); written `WHOLE_CHUNK` entries at a time it is the same bytes."""
    snap = Snapshot.load(tmp_path)
    count = 20_000
    for n in range(count):
        snap.set(
            f"entries/c/turns/user/{n:05}__{n:032x}.md",
            hashlib.sha256(b"%d" % n).hexdigest(),
            f"{n:032x}",
        )
    snap.set('entries/c/"odd" é.md', "h", "id é")
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        snap._write_whole()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # a chunk's worth; built whole, about 17 MB here
    expected = {
        rel: {"hash": s.digest, "id": s.fact_id}
        for rel in sorted(snap.paths())
        if (s := snap.get(rel))
    }
    line = json.dumps(expected, ensure_ascii=False, separators=(",", ":")) + "\n"
    assert (tmp_path / SNAPSHOT_FILE).read_bytes() == line.encode()
    assert Snapshot.load(tmp_path).get('entries/c/"odd" é.md') == memory_snapshot.Seen("h", "id é")


def test_a_released_snapshot_saves_its_changes_without_holding_its_entries(
    tmp_path: Path,
) -> None:
    """A proxy only writes the snapshot after its start-up catch-up: released, a save
    appends what changed, and the copy is not taken in again (two entries a turn for
    good, about 600 B); the next read takes the file in, this process's changes on top."""
    paths = [f"entries/global/turns/user/{n:05}__{n:032x}.md" for n in range(2_000)]
    snap = filled(tmp_path, 1_000)
    snap.release()
    assert not snap.held
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for n, rel in enumerate(paths):
            snap.set(rel, hashlib.sha256(str(n).encode()).hexdigest(), f"{n:032x}")
            if n % 20 == 19:
                snap.save()  # a write batch's save
        snap.drop("entries/global/turns/user/5.md")
        snap.save()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert not snap.held
    assert grown < 20_000  # held, 2,000 entries are about 300 KB
    written = lines(tmp_path)
    assert len(written[0]) == 1_000  # the whole snapshot, as it was released
    assert written[-1] == {"entries/global/turns/user/5.md": None}
    snap.set("entries/global/unsaved.md", "hu", "unsaved")
    assert len(snap) == 1_000 - 1 + 2_000 + 1  # read: the file taken in, the change on top
    assert snap.held
    assert snap.get("entries/global/unsaved.md") == memory_snapshot.Seen("hu", "unsaved")
    again = Snapshot.load(tmp_path)
    assert len(again) == 1_000 - 1 + 2_000
    assert again.get(paths[42]) == memory_snapshot.Seen(
        hashlib.sha256(b"42").hexdigest(), f"{42:032x}"
    )


def test_a_released_snapshot_is_folded_in_when_due_and_stays_released(tmp_path: Path) -> None:
    snap = filled(tmp_path, 10)
    snap.release()
    for n in range(memory_snapshot.REWRITE_AT_LEAST + 1):
        snap.set(f"entries/global/turns/user/{n % 10}.md", f"v{n}", f"id{n % 10}")
        snap.save()
    assert not snap.held
    assert len(lines(tmp_path)) < memory_snapshot.REWRITE_AT_LEAST  # rewritten on the way
    last = memory_snapshot.REWRITE_AT_LEAST
    assert Snapshot.load(tmp_path).get(
        f"entries/global/turns/user/{last % 10}.md"
    ) == memory_snapshot.Seen(f"v{last}", f"id{last % 10}")


def test_a_released_snapshot_whose_file_went_writes_what_it_has(tmp_path: Path) -> None:
    snap = filled(tmp_path, 3)
    snap.release()
    (tmp_path / SNAPSHOT_FILE).unlink()
    snap.set("new.md", "hn", "new")
    snap.save()  # a hint: the files it lacks are read again at the next start
    assert lines(tmp_path) == [{"new.md": {"hash": "hn", "id": "new"}}]
    assert not snap.held


def test_a_released_save_after_a_torn_line_keeps_its_own_line_whole(tmp_path: Path) -> None:
    snap = filled(tmp_path, 3)
    snap.release()
    with open(tmp_path / SNAPSHOT_FILE, "ab") as handle:
        handle.write(b'{"torn.md":{"hash":"h')  # another process died mid-write
    snap.set("after.md", "ha", "after")
    snap.save()
    reopened = Snapshot.load(tmp_path)
    assert reopened.get("after.md") == memory_snapshot.Seen("ha", "after")
    assert reopened.get("torn.md") is None
    assert len(reopened) == 4


def test_processes_keep_each_others_changes_when_one_is_released(tmp_path: Path) -> None:
    proxy, cli = Snapshot.load(tmp_path), Snapshot.load(tmp_path)
    proxy.set("a.md", "h1", "a")
    proxy.save()
    proxy.release()
    cli.set("b.md", "h2", "b")
    cli.save()
    proxy.set("c.md", "h3", "c")
    proxy.save()
    cli.set("d.md", "h4", "d")
    cli.save()  # takes in the proxy's line first
    assert sorted(cli.paths()) == ["a.md", "b.md", "c.md", "d.md"]
    assert sorted(proxy.paths()) == ["a.md", "b.md", "c.md", "d.md"]


def test_a_released_save_that_fails_stays_released_and_keeps_its_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = filled(tmp_path, 3)
    snap.release()
    (tmp_path / SNAPSHOT_FILE).unlink()  # the next save writes the file whole

    def full_disk(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(memory_snapshot, "write_atomic", full_disk)
    snap.set("new.md", "hn", "new")
    with pytest.raises(OSError, match="No space left"):
        snap.save()
    assert not snap.held
    monkeypatch.undo()
    snap.save()
    assert lines(tmp_path) == [{"new.md": {"hash": "hn", "id": "new"}}]
