"""What only the SQLite backend must show: processes sharing a file, crashes, bad files."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane.store import TABLES, NewMessage, SearchFilter, StoreError, analysis
from memlane.store.message_log import CLIENT_HASHES, CLIENT_HISTORY
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite.connection import PAGE_CACHE_KIB
from memlane.store.sqlite.index import index_terms
from memlane.store.sqlite.schema import (
    MIGRATIONS,
    m001_initial,
    m011_keyword_index_in_process,
    m012_client_history_index,
)
from memlane.store.sqlite.tags import doc_tags
from memlane.types import Fact, Message
from tests.store.fts5_reference import fts5_reference
from tests.store.old_schema import sqlite_before

ROOT = Path(__file__).resolve().parents[2]


def writer(db: Path, mode: str, tag: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer", str(db), mode, tag, str(count)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out


def user(text: str) -> NewMessage:
    return NewMessage(Message(role="user", text=text))


OPEN_AT = """
import sys, time
from pathlib import Path
from memlane.store.sqlite import SQLiteStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
SQLiteStore(Path(sys.argv[1])).close()
"""
"""Open the store at a given moment: imports done, the processes open together."""


def test_processes_opening_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """The switch to WAL can be refused at once, not after the busy timeout, to one of two
    processes creating the file together (`serve --workers` on a fresh home)."""
    for round_ in range(8):
        db = tmp_path / f"round-{round_}" / "memlane.db"
        at = str(time.time() + 1.0)
        opening = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT, str(db), at],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        for process in opening:
            _, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
        store = SQLiteStore(db)
        assert store.count("sessions") == 0
        store.close()


def test_two_processes_appending_to_one_session_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"  # both create it: migrations run once, under the write lock
    count = 150
    children = [writer(db, "append", tag, count) for tag in ("left", "right")]
    for child in children:
        assert len(finish(child).split()) == count

    store = SQLiteStore(db)
    session = store.find_session("shared")
    assert session is not None
    stored = store.list_messages(session.id)
    assert [m.position for m in stored] == list(range(2 * count))
    for tag in ("left", "right"):
        mine = [m.message.text for m in stored if m.message.text.startswith(tag)]
        assert mine == [f"{tag} message {i}" for i in range(count)]
    assert session.message_count == 2 * count
    store.close()


def test_two_processes_resending_one_history_store_it_once(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    SQLiteStore(db).close()
    count = 60
    children = [writer(db, "sync", tag, count) for tag in ("a", "b")]
    for child in children:
        finish(child)

    store = SQLiteStore(db)
    session = store.find_session("shared")
    assert session is not None
    everything = store.list_messages(session.id, include_superseded=True)
    assert [m.message.text for m in everything] == [f"turn {i}" for i in range(count)]
    store.close()


def test_sigkill_mid_append_keeps_every_committed_message(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    SQLiteStore(db).close()
    child = writer(db, "append", "crash", 100_000)
    assert child.stdout is not None
    committed: list[int] = []
    for line in child.stdout:
        committed.append(int(line))
        if len(committed) >= 300:
            break
    os.kill(child.pid, signal.SIGKILL)
    # read on from the same file object: lines its read-ahead already holds are committed too
    # (`communicate` would read the pipe behind that buffer and skip them)
    with child.stdout, child.stderr or contextlib.nullcontext():
        rest = child.stdout.read()
    child.wait(timeout=30)
    committed.extend(int(n) for n in rest.split())
    assert child.returncode == -signal.SIGKILL

    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    raw.close()
    store = SQLiteStore(db)
    session = store.find_session("shared")
    assert session is not None
    stored = [m.message.text for m in store.list_messages(session.id)]
    assert stored[: len(committed)] == [f"crash message {i}" for i in committed]
    assert stored == [f"crash message {i}" for i in range(len(stored))]
    assert session.message_count == len(stored)
    store.append_messages(session.id, [user("after the crash")])
    assert store.list_messages(session.id)[-1].message.text == "after the crash"
    store.close()


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            for i in range(40):
                store.append_messages(session.id, [user(f"t{tag}-{i}")])
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [m.position for m in store.list_messages(session.id)] == list(range(160))
    store.close()


def test_every_connection_has_a_bounded_page_cache_and_no_memory_map(tmp_path: Path) -> None:
    """What SQLite holds in the proxy is at most `PAGE_CACHE_KIB` per thread that uses the
    store, whatever the library's build sets: every thread's connection has it."""
    store = SQLiteStore(tmp_path / "memlane.db")
    seen: list[tuple[int, int]] = []

    def pragmas() -> None:
        with store._reading() as db:
            cache = db.conn.execute("PRAGMA cache_size").fetchone()[0]
            mmap = db.conn.execute("PRAGMA mmap_size").fetchone()[0]
        seen.append((cache, mmap))

    pragmas()
    thread = threading.Thread(target=pragmas)
    thread.start()
    thread.join()
    assert seen == [(-PAGE_CACHE_KIB, 0), (-PAGE_CACHE_KIB, 0)]
    store.close()


def _written_by_this_thread() -> int:
    """Bytes this thread has handed to write(2) and its kin, to any file."""
    for line in Path("/proc/thread-self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/thread-self/io")


def test_a_batch_of_writes_keeps_its_savepoint_journal_in_memory(tmp_path: Path) -> None:
    """Every write of a batch is a savepoint, and SQLite keeps the pages each one changes
    in a statement journal, which past 64 KiB went to a temporary file in /var/tmp: under
    200 clients, two writes in three the proxy made were to such files (remembered turns'
    text included, outside the home), which the memory book's 64 entries a write and the
    writer's larger writes filled. So a batch now writes its WAL frames and nothing else."""
    store = SQLiteStore(tmp_path / "memlane.db")
    when = (datetime(2026, 3, 1, tzinfo=UTC),) * 2

    def entries(prefix: str, count: int) -> list[Fact]:
        return [
            Fact(f"{prefix}{n:05d}", f"conv:c{n % 50}", f"c{n % 50}", "user", f"turn {n}", *when)
            for n in range(count)
        ]

    held = entries("a", 4000)
    for first in range(0, len(held), 500):
        store.put_facts(held[first : first + 500])
    store.checkpointer.stop()  # nothing but this thread writes the WAL meanwhile
    with contextlib.closing(sqlite3.connect(tmp_path / "memlane.db")) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # its frames now grow the file
    wal = tmp_path / "memlane.db-wal"
    frames_before, written_before = wal.stat().st_size, _written_by_this_thread()
    with store.transaction():  # as the book writes its entries
        store.put_facts(entries("b", 64))
        store.put_facts(held[:64])  # rewritten: their pages are journaled
    frames = wal.stat().st_size - frames_before
    written = _written_by_this_thread() - written_before
    assert frames > 0
    assert written <= frames + 4096  # a statement journal on disk would add over 64 KiB
    assert store.get_fact("b00063") is not None
    store.close()


def test_a_connection_whose_thread_ended_is_closed_when_the_next_opens(tmp_path: Path) -> None:
    """A thread pool that replaces its threads (AnyIO's ends those idle for 10 s) must not
    leave a connection, and its page cache, open per thread it ever had."""
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s")
    for n in range(6):
        thread = threading.Thread(target=store.append_messages, args=(session.id, [user(f"{n}")]))
        thread.start()
        thread.join()
    assert store.open_connections == 2  # this thread's, and the last thread's until the next
    assert len(store.list_messages(session.id)) == 6
    store.close()


def event(store: SQLiteStore, session_id: str, text: str) -> str:
    return str(store.add_event(session_id, "dropped", {}, text=text).id)


def test_a_second_instance_sees_vectors_written_and_removed_elsewhere(tmp_path: Path) -> None:
    """The in-process vector cache follows writes made through another connection."""
    reader = SQLiteStore(tmp_path / "memlane.db")
    other = SQLiteStore(tmp_path / "memlane.db")
    session = other.ensure_session("s", namespace="ns")
    stored = [event(other, session.id, "one"), event(other, session.id, "two")]
    vectors = np.eye(4, dtype=np.float32)
    assert reader.vector_search(vectors[0], SearchFilter(), model="m") == []
    other.put_vectors("event", [(stored[0], vectors[0])], model="m")
    assert [h.ref for h in reader.vector_search(vectors[0], SearchFilter(), model="m")] == [
        stored[0]
    ]
    other.put_vectors("event", [(stored[1], vectors[1])], model="m")
    hits = reader.vector_search(vectors[1], SearchFilter(scopes=("ns",)), model="m", limit=1)
    assert [h.ref for h in hits] == [stored[1]]
    other.delete_session(session.id)
    assert reader.vector_search(vectors[1], SearchFilter(), model="m") == []
    fresh = other.ensure_session("t")
    ref = event(other, fresh.id, "x")
    other.put_vectors("event", [(ref, vectors[2])], model="m")
    assert [h.ref for h in reader.vector_search(vectors[2], SearchFilter(), model="m")] == [ref]
    # a vector added and another removed between two queries: rebuilt, new one read
    doomed = other.ensure_session("doomed")
    doomed_ref = event(other, doomed.id, "y")
    other.put_vectors("event", [(doomed_ref, vectors[3])], model="m")
    assert len(reader.vector_search(vectors[3], SearchFilter(), model="m")) == 2
    later = event(other, fresh.id, "z")
    other.put_vectors("event", [(later, vectors[3])], model="m")
    other.delete_session(doomed.id)
    hits = reader.vector_search(vectors[3], SearchFilter(), model="m")
    assert [(h.ref, round(h.score, 4)) for h in hits] == [(later, 1.0), (ref, 0.0)]
    with pytest.raises(StoreError, match="dimensions"):
        reader.vector_search(np.ones(3, dtype=np.float32), SearchFilter(), model="m")
    reader.close()
    other.close()


def test_reopening_keeps_data_and_applies_migrations_once(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "er" / "memlane.db"
    store = SQLiteStore(db)
    session = store.ensure_session("s")
    store.append_messages(session.id, [user("kept")])
    store.close()
    store = SQLiteStore(db, synchronous="full")
    assert [m.message.text for m in store.list_messages(session.id)] == ["kept"]
    store.close()
    with sqlite3.connect(db) as raw:
        names = [r[0] for r in raw.execute("SELECT name FROM migrations ORDER BY name")]
        assert names == [m.__name__ for m in MIGRATIONS]
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.ensure_session("s")


# --- bad files: a clear one-line error, and the file left exactly as it was --------------


def assert_refused(db: Path, *fragments: str) -> None:
    before = db.read_bytes() if db.is_file() else None
    with pytest.raises(StoreError) as caught:
        SQLiteStore(db)
    message = str(caught.value)
    assert "\n" not in message
    assert str(db) in message
    for fragment in fragments:
        assert fragment in message
    if before is not None:
        assert db.read_bytes() == before


def test_a_corrupt_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    db.write_bytes(b"this is not a database, just notes\n" * 200)
    assert_refused(db, "not a readable memlane database", "backup")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memlane.db"]


def test_a_database_with_a_damaged_header_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    store = SQLiteStore(db)
    store.ensure_session("s")
    store.close()
    data = bytearray(db.read_bytes())
    data[:16] = b"garbage garbage!"
    db.write_bytes(bytes(data))
    assert_refused(db, "not a readable memlane database")


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        raw.execute("INSERT INTO invoices (total) VALUES (9.5)")
    raw.close()
    assert_refused(db, "another application", "invoices")


def test_a_database_from_a_newer_memlane_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    SQLiteStore(db).close()
    with sqlite3.connect(db) as raw:
        raw.execute("INSERT INTO migrations VALUES ('m999_future', '2030-01-01T00:00:00+00:00')")
    raw.close()
    assert_refused(db, "newer memlane", "m999_future")


def test_an_unwritable_home_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "home"
    blocker.write_text("a file where the data home should be\n")
    assert_refused(blocker / "memlane.db", "MEMLANE_HOME")
    assert blocker.read_text() == "a file where the data home should be\n"


def test_a_folder_in_place_of_the_database_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    db.mkdir()
    assert_refused(db, "not a database file")


@pytest.mark.parametrize(
    "text",
    [
        "The parsers were Running over src/app/main.py, parse_config_file and E1234!",
        "loadUserProfile()\tfailed\n\nwith  HTTPServerError (v2.3.1) at foo@bar.com…",
        "émigré Crème brûlée — naïve café; 東京 タワー #12 c++ a/b/c.",
        "",
    ],
)
def test_memoised_index_terms_equal_the_analyser(text: str) -> None:
    assert index_terms(text) == " ".join(analysis.terms(text))


def test_an_older_schema_is_migrated_at_open_and_stays_searchable(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        m001_initial(raw)
        raw.execute("INSERT INTO migrations VALUES ('m001_initial', '2026-01-01T00:00:00+00:00')")
        raw.execute(
            """INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, created_at)
               VALUES ('fact', 'f1', 'repo', NULL, 'memory', 'walrus facts', ?,
               '2026-01-01T00:00:00+00:00')""",
            (index_terms("walrus facts"),),
        )
    raw.close()
    store = SQLiteStore(db)
    hits = store.keyword_search("walrus", SearchFilter(scopes=("repo",)))
    assert [h.ref for h in hits] == ["f1"]
    assert store.keyword_search("walrus", SearchFilter(scopes=("other",))) == []
    store.close()
    with sqlite3.connect(db) as raw:
        names = [r[0] for r in raw.execute("SELECT name FROM migrations ORDER BY name")]
    raw.close()
    assert names == [m.__name__ for m in MIGRATIONS]


def memory(fact_id: str, text: str, scope: str = "ns", conversation: str = "c") -> Fact:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    return Fact(fact_id, scope, conversation, "memory", text, stamp, stamp)


def test_keyword_search_over_very_common_terms_keeps_its_results(tmp_path: Path) -> None:
    """Terms in most documents get almost no BM25 weight (FTS5 floors their IDF), yet the
    documents matching only them still fill the results, in FTS5's order."""
    store = SQLiteStore(tmp_path / "memlane.db")
    filler = [memory(f"f{i}", f"common words filler number {i}") for i in range(1200)]
    store.put_facts([*filler, memory("rare", "common words and a rare aardvark")])
    hits = store.keyword_search("common aardvark", SearchFilter(scopes=("ns",)), limit=5)
    assert hits[0].text == "common words and a rare aardvark"
    assert len(hits) == 5
    assert all("common" in h.text for h in hits)
    assert hits[0].score > hits[1].score >= hits[-1].score >= 0
    assert [h.text for h in hits[1:]] == [f"common words filler number {i}" for i in (0, 1, 2, 3)]
    only_common = store.keyword_search("common", SearchFilter(), limit=3)
    assert len(only_common) == 3
    store.close()


def keyword_index_consistent(db: Path) -> None:
    """A process opening `db` ranks its documents as FTS5 over the same rows does: the
    documents' terms are whole and the index built from them is FTS5's."""
    store = SQLiteStore(db)
    try:
        with fts5_reference(db) as fts5:
            terms = fts5.common_terms(8)
            assert terms, "no documents to check"
            for query in [*terms, " ".join(terms[::2]), " ".join(terms[1::3])]:
                hits = store.keyword_search(query, SearchFilter(), limit=20)
                assert [(h.ref, round(h.score, 9)) for h in hits] == fts5.ranking(query, 20)
    finally:
        store.close()


def test_the_keyword_index_matches_its_documents_after_every_kind_of_write(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memlane.db"
    store = SQLiteStore(db)
    a = store.ensure_session("a", namespace="ns")
    store.sync_messages(a.id, [user("first question"), user("second question")])
    store.sync_messages(a.id, [user("first question"), user("edited question")])
    store.add_event(a.id, "dropped", {}, text="dropped history text")
    fork = store.fork_session(a.id, new_key="fork")
    store.add_event(fork.id, "dropped", {}, text="only in the fork")
    for text in ("fact text", "changed fact text"):
        store.put_fact(memory("f", text, conversation=a.id))
    store.put_fact(memory("d", "fork fact deleted", conversation=fork.id))
    store.delete_fact("d")
    store.put_fact(memory("g", "gone soon", scope="other", conversation="x"))
    store.purge_fact("g")
    dump = {table: list(store.dump(table)) for table in TABLES}
    store.delete_session(a.id)
    store.close()
    keyword_index_consistent(db)

    copy = SQLiteStore(tmp_path / "copy.db")
    for table in TABLES:
        copy.load(table, dump[table])
    copy.close()
    keyword_index_consistent(tmp_path / "copy.db")


def test_an_older_file_drops_its_fts5_index_and_keeps_its_documents(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    raw = sqlite_before(path, m011_keyword_index_in_process)
    terms = index_terms("the deploy script lives in tools/ship.sh")
    raw.execute(
        "INSERT INTO docs (kind, ref, scope, session_id, role, text, terms, created_at, active,"
        " tags) VALUES ('fact', 'old', 'ns', NULL, 'memory', ?, ?, '2026-01-01', 1, ?)",
        ("the deploy script lives in tools/ship.sh", terms, doc_tags("fact", "ns", None)),
    )
    raw.execute("INSERT INTO docs_fts (rowid, terms, tags) SELECT rowid, terms, tags FROM docs")
    raw.close()

    store = SQLiteStore(path)
    try:
        assert [h.ref for h in store.keyword_search("tools/ship.sh", SearchFilter())] == ["old"]
        stamp = datetime(2026, 1, 2, tzinfo=UTC)
        store.put_fact(Fact("f", "ns", "c", "memory", "the deploy runs nightly", stamp, stamp))
        store.put_fact(Fact("f", "ns", "c", "memory", "the deploy runs hourly", stamp, stamp))
        store.purge_fact("f")  # updates and deletes no longer reach for the dropped index
        assert [h.ref for h in store.keyword_search("deploy", SearchFilter())] == ["old"]
    finally:
        store.close()
    with sqlite3.connect(path) as raw:
        left = raw.execute("SELECT name FROM sqlite_master WHERE name LIKE 'docs_fts%'").fetchall()
    raw.close()
    assert left == []


def test_a_turns_stored_history_is_read_from_an_index_alone(tmp_path: Path) -> None:
    """Each turn reads its session's client history to find its edit point: the ids and
    hashes come from one covering index, never the message rows with their text, in a new
    file and in one opened from before the index."""
    new = SQLiteStore(tmp_path / "new.db")
    new.close()
    sqlite_before(tmp_path / "old.db", m012_client_history_index).close()
    SQLiteStore(tmp_path / "old.db").close()
    for name, query in itertools.product(("new.db", "old.db"), (CLIENT_HISTORY, CLIENT_HASHES)):
        with contextlib.closing(sqlite3.connect(tmp_path / name)) as raw:
            plan = raw.execute(f"EXPLAIN QUERY PLAN {query}", ("s",)).fetchall()
        assert [row[3] for row in plan] == [
            "SEARCH messages USING COVERING INDEX messages_client_history (session_id=?)"
        ]


def test_opening_an_older_file_indexes_its_turns_with_their_neighbours(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i, text in enumerate(["we adopted a greyhound", "her name is Biscuit"]):
        when = start + timedelta(minutes=i)
        store.put_fact(Fact(f"t{i}", "conv:c", "c", "user", text, when, when))
    store.close()
    # the file as m004 left it: each turn indexed alone, m005 not applied
    raw = sqlite3.connect(path)
    with raw:
        for ref, text in (("t0", "we adopted a greyhound"), ("t1", "her name is Biscuit")):
            raw.execute("UPDATE docs SET terms = ? WHERE ref = ?", (index_terms(text), ref))
        raw.execute("DELETE FROM migrations WHERE name = 'm005_turn_context'")
    raw.close()

    store = SQLiteStore(path)
    try:
        hits = store.keyword_search("greyhound", SearchFilter(kinds=("fact",)))
        assert {h.ref for h in hits} == {"t0", "t1"}
        assert {h.text for h in hits} == {"we adopted a greyhound", "her name is Biscuit"}
    finally:
        store.close()


def test_sessions_of_an_older_file_keep_their_messages_when_tenants_arrive(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    session = store.ensure_session("old", namespace="repo")
    store.append_messages(session.id, [NewMessage(Message("user", "kept through the rebuild"))])
    store.set_state(session.id, "todo", "still here")
    store.close()
    # the file as it was before sessions had tenants: the sessions table of m001
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("PRAGMA foreign_keys = OFF")
        raw.execute("PRAGMA legacy_alter_table = ON")  # messages keep naming `sessions`
        raw.execute("ALTER TABLE sessions RENAME TO sessions_tenanted")
        m001_initial_sessions(raw)
        raw.execute(
            "INSERT INTO sessions SELECT id, key, namespace, title, parent_id, fork_position, "
            "summary, summarized_count, metadata, prompt_tokens, completion_tokens, cost_usd, "
            "message_count, created_at, updated_at FROM sessions_tenanted"
        )
        raw.execute("DROP TABLE sessions_tenanted")
        raw.execute("DELETE FROM migrations WHERE name = 'm008_session_tenants'")
    raw.close()

    store = SQLiteStore(path)
    try:
        again = store.find_session("old")
        assert again is not None
        assert (again.id, again.tenant, again.namespace) == (session.id, "", "repo")
        assert [m.message.text for m in store.list_messages(session.id)] == [
            "kept through the rebuild"
        ]
        assert store.get_state(session.id) == {"todo": "still here"}
        assert store.ensure_session("old", tenant="t" * 32).id != session.id
    finally:
        store.close()


def m001_initial_sessions(raw: sqlite3.Connection) -> None:
    """The sessions table as m001 made it (its key unique across the whole store)."""
    raw.execute(
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, namespace TEXT NOT NULL, title TEXT,
            parent_id TEXT, fork_position INTEGER, summary TEXT NOT NULL DEFAULT '',
            summarized_count INTEGER NOT NULL DEFAULT 0, metadata TEXT NOT NULL DEFAULT '{}',
            prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0, message_count INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL
        )"""
    )


def test_closing_waits_for_a_write_running_in_another_thread(tmp_path: Path) -> None:
    """A store call can outlive its caller (a request that went away leaves it to finish
    in a worker thread); closing under it would crash the process inside SQLite."""
    path = tmp_path / "memlane.db"
    store = SQLiteStore(path)
    session = store.ensure_session("s", namespace="ns")
    inside, may_end = threading.Event(), threading.Event()

    def write() -> None:
        with store.transaction():
            store.append_messages(session.id, [user("written while the store closes")])
            inside.set()
            assert may_end.wait(10)

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(5)
    closing = threading.Thread(target=store.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # waiting for the write
    may_end.set()
    writer.join(5)
    closing.join(5)
    assert not closing.is_alive()
    with pytest.raises(StoreError, match="closed"):
        store.list_messages(session.id)

    reopened = SQLiteStore(path)
    try:
        texts = [m.message.text for m in reopened.list_messages(session.id)]
    finally:
        reopened.close()
    assert texts == ["written while the store closes"]
