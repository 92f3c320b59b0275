"""What the PostgreSQL backend owes beyond the contract: many replicas on one database.

Every test runs against a real PostgreSQL with pgvector (tests/support/pg.py).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memlane.store import NewMessage, SearchFilter, StoreError
from memlane.store.postgres import PostgresStore
from memlane.store.postgres.schema import MIGRATIONS
from memlane.store.urls import redact
from memlane.types import Message
from tests.store.contract.support import fact, unit


def user(text: str) -> NewMessage:
    return NewMessage(Message(role="user", text=text, wire="chat"))


def assistant(text: str) -> NewMessage:
    return NewMessage(Message(role="assistant", text=text, wire="chat"))


@pytest.fixture
def open_store(pg_url: str) -> Iterator[Callable[[], PostgresStore]]:
    """Opens any number of stores (replicas) on one fresh database; closes them after."""
    opened: list[PostgresStore] = []

    def make() -> PostgresStore:
        store = PostgresStore(pg_url)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


# --- start-up -----------------------------------------------------------------------------


def test_replicas_starting_together_migrate_once(
    pg_url: str, open_store: Callable[[], PostgresStore]
) -> None:
    barrier = threading.Barrier(4)

    def start() -> PostgresStore:
        barrier.wait()
        return open_store()

    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: start(), range(4)))
    assert len(stores) == 4
    applied = rows(pg_url, "SELECT name FROM migrations ORDER BY name")
    assert applied == [(name,) for name, _ in MIGRATIONS]
    session = stores[0].ensure_session("k")
    assert stores[3].get_session(session.id) == session


def test_reopening_keeps_data(pg_url: str, open_store: Callable[[], PostgresStore]) -> None:
    first = open_store()
    session = first.ensure_session("keep")
    first.append_messages(session.id, [user("still here")])
    first.close()
    again = open_store()
    assert [m.message.text for m in again.list_messages(session.id)] == ["still here"]
    assert rows(pg_url, "SELECT count(*) FROM migrations") == [(len(MIGRATIONS),)]


def test_a_database_from_a_newer_memlane_is_refused(
    pg_url: str, open_store: Callable[[], PostgresStore]
) -> None:
    open_store().close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO migrations (name) VALUES ('m999_future')")
    with pytest.raises(StoreError, match="newer memlane"):
        PostgresStore(pg_url)


def test_another_applications_tables_are_refused_and_left_alone(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE sessions (token text)")
        conn.execute("INSERT INTO sessions VALUES ('theirs')")
    with pytest.raises(StoreError, match="not memlane's"):
        PostgresStore(pg_url)
    assert rows(pg_url, "SELECT token FROM sessions") == [("theirs",)]
    assert rows(pg_url, "SELECT to_regclass('migrations')") == [(None,)]


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    url = "postgresql://memlane:s3cret@127.0.0.1:1/memlane?connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert "s3cret" not in message
    assert "memlane:***@127.0.0.1:1" in message
    assert "\n" not in message


def test_the_url_is_shown_without_its_password() -> None:
    assert redact("postgresql://u:pw@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert redact("postgresql://db/x") == "postgresql://db/x"


def test_a_closed_store_refuses_work(open_store: Callable[[], PostgresStore]) -> None:
    store = open_store()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.ensure_session("late")


# --- transactions ----------------------------------------------------------------------------


def test_a_failed_statement_whose_error_is_caught_fails_its_transaction_loudly(
    open_store: Callable[[], PostgresStore],
) -> None:
    """A store call inside a transaction joins it, with no savepoint of its own (two round
    trips each). After a failed statement PostgreSQL refuses the rest, and a commit would
    roll everything back without a word: the transaction raises instead."""
    store = open_store()
    session = store.ensure_session("s")

    def caught() -> None:
        with store.transaction():
            store.append_messages(session.id, [user("lost")])
            with contextlib.suppress(psycopg.errors.NumericValueOutOfRange):
                store.add_usage(session.id, prompt_tokens=2**70)

    with pytest.raises(StoreError, match="caught"):
        caught()
    assert store.list_messages(session.id) == []
    store.append_messages(session.id, [user("after")])  # the store is usable after
    assert [m.message.text for m in store.list_messages(session.id)] == ["after"]


def test_a_failing_call_in_a_transaction_of_its_own_is_undone_alone(
    open_store: Callable[[], PostgresStore],
) -> None:
    """What a caller that goes on after a failure wraps its call in: a savepoint."""
    store = open_store()
    session = store.ensure_session("s")

    def failing() -> None:
        with store.transaction():
            store.add_event(session.id, "undone", {})
            store.add_usage(session.id, prompt_tokens=2**70)

    with store.transaction():
        store.append_messages(session.id, [user("kept")])
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            failing()
        store.add_event(session.id, "turn", {})
    assert [m.message.text for m in store.list_messages(session.id)] == ["kept"]
    assert [e.kind for e in store.list_events(session.id)] == ["turn"]


def test_writes_in_one_transaction_are_undone_alone_at_any_depth(
    open_store: Callable[[], PostgresStore],
) -> None:
    """A write's savepoint is released with the next one at its depth, not on its own
    (`postgres.savepoints`): siblings after a failure, writes inside writes, and a write
    that fails after the ones inside it succeeded are each undone alone, or with what is
    inside them."""
    store = open_store()
    session = store.ensure_session("s")

    def event(kind: str, *, fail: bool = False) -> None:
        with store.transaction():
            store.add_event(session.id, kind, {})
            if fail:
                store.add_usage(session.id, prompt_tokens=2**70)

    def outer(kind: str, inner: list[tuple[str, bool]], *, fail: bool = False) -> None:
        with store.transaction():
            store.add_event(session.id, kind, {})
            for name, failing in inner:
                with contextlib.suppress(psycopg.errors.NumericValueOutOfRange):
                    event(name, fail=failing)
            if fail:
                raise RuntimeError("the outer write fails after its inner ones")

    with store.batch():
        event("a")
        with contextlib.suppress(psycopg.errors.NumericValueOutOfRange):
            event("lost", fail=True)
        event("b")
        outer("c", [("c1", False), ("c-lost", True), ("c2", False)])
        with contextlib.suppress(RuntimeError):
            outer("lost-outer", [("lost-inner", False), ("lost-inner-2", False)], fail=True)
        outer("d", [("d1", False)])
        event("e")
    kinds = [e.kind for e in store.list_events(session.id)]
    assert kinds == ["a", "b", "c", "c1", "c2", "d", "d1", "e"]


def test_a_write_in_a_transaction_is_one_round_trip_for_its_savepoint(
    open_store: Callable[[], PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its release goes with the next write's savepoint, or the commit: a savepoint and a
    release each were two round trips a write, a dozen a turn."""
    store = open_store()
    sessions = [store.ensure_session(f"s{n}") for n in range(4)]
    sent: list[str] = []
    execute, command = psycopg.Cursor.execute, psycopg.Connection._exec_command

    def counted_execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(cursor, query, *args, **kwargs)

    def counted_command(conn: Any, what: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(what))
        return command(conn, what, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "_exec_command", counted_command)
    with store.batch():
        sent.clear()
        for session in sessions:
            with store.transaction():
                store.add_usage(session.id, prompt_tokens=1)
        inside = list(sent)
    assert len(inside) == 2 * len(sessions)  # a savepoint and the update, each
    assert sent[len(inside) :] == [str(b"COMMIT")]  # psycopg sends its commands as bytes
    for session in sessions:
        got = store.get_session(session.id)
        assert got is not None
        assert got.prompt_tokens == 1


def test_a_read_outside_a_transaction_leaves_none_open(
    pg_url: str, open_store: Callable[[], PostgresStore]
) -> None:
    """Reads run in autocommit: under READ COMMITTED a transaction around them took no
    common snapshot, only a BEGIN and a COMMIT (two round trips), and one left open while
    its reader paused would hold back the server's cleanup of old rows."""
    store = open_store()
    session = store.ensure_session("s")
    with store._reading() as db:
        assert db.one("SELECT id FROM sessions WHERE id = ?", session.id) is not None
        open_now = rows(
            pg_url,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        assert open_now == [(0,)]


# --- per-session serialisation across replicas ------------------------------------------------


def test_two_replicas_resending_one_history_store_it_once_in_order(
    open_store: Callable[[], PostgresStore],
) -> None:
    """The same request reaching two replicas at the same moment is stored once."""
    a, b = open_store(), open_store()
    session = a.ensure_session("shared")
    barrier = threading.Barrier(2)
    history: list[NewMessage] = []
    added = [0, 0]

    def send(index: int, store: PostgresStore, turn: list[NewMessage]) -> None:
        barrier.wait()
        added[index] += len(store.sync_messages(session.id, turn).added)

    for i in range(20):
        history.append(user(f"question {i}"))
        turn = list(history)
        threads = [
            threading.Thread(target=send, args=(0, a, turn)),
            threading.Thread(target=send, args=(1, b, turn)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        (a if i % 2 else b).append_messages(session.id, [assistant(f"answer {i}")])
        history.append(assistant(f"answer {i}"))

    stored = b.list_messages(session.id)
    assert [m.message.text for m in stored] == [m.message.text for m in history]
    assert [m.position for m in stored] == list(range(40))
    assert sum(added) == 20
    assert b.get_session(session.id).message_count == 40  # type: ignore[union-attr]


def test_replicas_appending_concurrently_lose_nothing(
    open_store: Callable[[], PostgresStore],
) -> None:
    stores = [open_store(), open_store()]
    session = stores[0].ensure_session("busy")

    def write(tag: int) -> None:
        for i in range(25):
            stores[tag].append_messages(session.id, [user(f"{tag}-{i}")])

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(write, range(2)))
    stored = stores[1].list_messages(session.id)
    assert [m.position for m in stored] == list(range(50))
    for tag in range(2):
        mine = [m.message.text for m in stored if m.message.text.startswith(f"{tag}-")]
        assert mine == [f"{tag}-{i}" for i in range(25)]


def test_ensure_session_is_race_free_across_replicas(
    open_store: Callable[[], PostgresStore],
) -> None:
    stores = [open_store() for _ in range(4)]
    barrier = threading.Barrier(4)

    def ensure(index: int) -> str:
        barrier.wait()
        return stores[index].ensure_session("one-key").id

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(ensure, range(4)))
    assert len(ids) == 1
    assert len(stores[0].list_sessions()) == 1


# --- search internals ------------------------------------------------------------------------


def test_keyword_search_survives_quotes_and_backslashes(
    open_store: Callable[[], PostgresStore],
) -> None:
    store = open_store()
    store.put_fact(fact("q", "O'Brien's path is C:\\\\Users\\\\o'b and it's fine"))
    hits = store.keyword_search("O'Brien's c:\\\\users", SearchFilter())
    assert [h.ref for h in hits] == ["q"]


def test_each_dimension_gets_its_own_hnsw_index(
    pg_url: str, open_store: Callable[[], PostgresStore]
) -> None:
    store = open_store()
    for i in range(6):
        store.put_fact(fact(f"f{i}", f"entry {i}", minutes=i))
    store.put_vectors("fact", [(f"f{i}", unit(i, dim=8)) for i in range(3)], model="small")
    store.put_vectors("fact", [(f"f{i}", unit(i, dim=12)) for i in range(3, 6)], model="large")
    indexes = rows(pg_url, "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw%'")
    assert sorted(str(name) for (name,) in indexes) == ["vectors_hnsw_12", "vectors_hnsw_8"]
    flt = SearchFilter()
    small = store.vector_search(unit(1, dim=8), flt, model="small", limit=3)
    large = store.vector_search(unit(4, dim=12), flt, model="large", limit=3)
    assert small[0].ref == "f1"
    assert {h.ref for h in small} == {"f0", "f1", "f2"}
    assert large[0].ref == "f4"
    assert {h.ref for h in large} == {"f3", "f4", "f5"}
    assert small[0].score == pytest.approx(1.0, abs=1e-5)


def test_filtered_vector_search_fills_the_limit_past_nearer_rows(
    pg_url: str, open_store: Callable[[], PostgresStore]
) -> None:
    """Rows the filter excludes must not crowd out the ones it wants, whatever the plan.

    (The server scans exactly when the filter is selective, or walks the HNSW
    index iteratively until enough rows pass it.)
    """
    store = open_store()
    query = unit(0, dim=16)
    near = [(f"n{i}", query + 0.05 * unit(100 + i, dim=16)) for i in range(300)]
    far = [(f"x{i}", unit(1000 + i, dim=16)) for i in range(5)]
    for ref, _ in near:
        store.put_fact(fact(ref, f"near {ref}", scope="crowd"))
    for ref, _ in far:
        store.put_fact(fact(ref, f"far {ref}", scope="wanted"))
    store.put_vectors(
        "fact",
        [(r, (v / np.linalg.norm(v)).astype(np.float32)) for r, v in near + far],
        model="m",
    )
    with psycopg.connect(pg_url) as conn:
        conn.execute("ANALYZE")
    hits = store.vector_search(query, SearchFilter(scopes=("wanted",)), model="m", limit=5)
    assert sorted(h.ref for h in hits) == [f"x{i}" for i in range(5)]


def test_keyword_search_over_very_common_terms_keeps_its_results(
    open_store: Callable[[], PostgresStore],
) -> None:
    """Terms in most documents are dropped from the match for speed, never from the results."""
    store = open_store()
    filler = [fact(f"f{i}", f"common words filler number {i}", scope="ns") for i in range(1200)]
    store.put_facts([*filler, fact("rare", "common words and a rare aardvark", scope="ns")])
    hits = store.keyword_search("common aardvark", SearchFilter(scopes=("ns",)), limit=5)
    assert hits[0].text == "common words and a rare aardvark"
    assert len(hits) == 5
    assert all("common" in h.text for h in hits)
    assert len(store.keyword_search("common", SearchFilter(), limit=3)) == 3


def counted_statements(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every statement sent to a server from now on, as it was sent."""
    statements: list[object] = []
    real = psycopg.Connection.execute

    def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(query)
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    return statements


def test_a_small_memory_counts_its_statistics_in_one_statement(
    open_store: Callable[[], PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `EXACT_BELOW` documents every search counts the collection and its words'
    frequencies afresh (a new user's first weeks): one round trip for both, then the
    search, not one each."""
    store = open_store()
    store.put_facts(
        [fact(f"f{i}", f"note {i} about tabs" if i % 2 else f"note {i}") for i in range(8)]
    )
    statements = counted_statements(monkeypatch)

    hits = store.keyword_search("tabs note", SearchFilter(), limit=3)
    nothing = store.keyword_search("aardvark", SearchFilter(), limit=3)

    assert len(statements) == 4
    assert [h.ref for h in hits] == ["f1", "f3", "f5"]
    assert nothing == []
    store.put_facts([fact("late", "tabs tabs tabs")])  # counted again: found, and ranked first
    assert store.keyword_search("tabs", SearchFilter(), limit=1)[0].ref == "late"


def test_a_search_whose_common_words_fill_its_places_is_one_statement(
    open_store: Callable[[], PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The places the informative words leave empty go to the newest documents with a
    common word, after the ranked ones, read in the same statement: each statement is a
    round trip in front of the request, and most questions have common words."""
    store = open_store()
    filler = [fact(f"f{i}", f"common words filler number {i}", scope="ns") for i in range(1200)]
    store.put_facts([*filler, fact("rare", "common words and a rare aardvark", scope="ns")])
    wanted = SearchFilter(scopes=("ns",))
    asked = [("common aardvark", 5), ("filler aardvark", 1), ("common words", 3)]
    for query, limit in asked:  # their words' statistics, counted once and kept
        store.keyword_search(query, wanted, limit=limit)
    statements = counted_statements(monkeypatch)

    hits, ranked_only, newest = (
        store.keyword_search(query, wanted, limit=limit) for query, limit in asked
    )

    assert len(statements) == 3
    assert [h.ref for h in hits] == ["rare", "f1199", "f1198", "f1197", "f1196"]
    assert hits[0].score > 0
    assert all(h.score == 0 for h in hits[1:])
    assert [h.ref for h in ranked_only] == ["rare"]
    assert [h.ref for h in newest] == ["rare", "f1199", "f1198"]


def test_a_memory_of_a_thousand_documents_keeps_its_statistics_a_while(
    open_store: Callable[[], PostgresStore],
) -> None:
    """A memory of a thousand documents or more weighs a search's words by statistics kept
    for `STATS_TTL`, not counted again: counting scanned every document that holds a
    common word, on every request. Another process (a new store) counts them afresh."""
    store = open_store()
    wanted = SearchFilter(scopes=("ns",))
    held = [fact(f"a{i}", f"an aardvark in note {i}", scope="ns") for i in range(10)]
    filler = [fact(f"f{i}", f"filler number {i}", scope="ns") for i in range(1_000)]
    store.put_facts([*held, *filler])
    (first,) = store.keyword_search("aardvark", wanted, limit=1)
    more = [fact(f"g{i}", f"more filler {i}", scope="ns") for i in range(1_000)]
    store.put_facts(more)  # twice the documents: a rarer word, a higher weight

    (again,) = store.keyword_search("aardvark", wanted, limit=1)
    (fresh,) = open_store().keyword_search("aardvark", wanted, limit=1)

    assert again.ref == first.ref
    assert again.score == pytest.approx(first.score)
    assert fresh.score > first.score * 1.05


def test_a_purged_session_leaves_no_copy_in_the_databases_files(pg_url: str) -> None:
    secret = "walrus-quartz-5518"
    store = PostgresStore(pg_url)
    try:
        session = store.ensure_session("doomed")
        store.append_messages(session.id, [user(f"my code is {secret}"), assistant("noted")])
        store.put_fact(fact("f1", f"the code is {secret}", conversation_id=session.id))
        store.put_fact(fact("t1", f"code {secret}", conversation_id=session.id, role="user"))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # what the tables hold is in their files now
            data = conn.execute("SHOW data_directory").fetchone()
            oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
            files = Path(str(data[0] if data else "")) / "base" / str(oid.fetchone()[0])  # type: ignore[index]

        def holding() -> list[str]:
            return [
                p.name for p in files.iterdir() if p.is_file() and secret.encode() in p.read_bytes()
            ]

        assert holding()
        assert store.delete_session(session.id)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        assert holding()  # a deleted row stays in its page until the table is rewritten
        store.purge_deleted()
        assert holding() == []
        assert rows(pg_url, "SELECT count(*) FROM messages") == [(0,)]
        store.ensure_session("after")  # the store goes on working
    finally:
        store.close()


def test_a_frequency_read_after_the_count_never_breaks_the_weights() -> None:
    """Replicas add documents between the count and the frequencies (or the count is
    cached): a word seen in more documents than counted weighs the least, never raises."""
    from memlane.store.bm25 import IDF_FLOOR
    from memlane.store.postgres.keywords import query_weights

    weights = query_weights(["tabs", "rare"], 10.0, 5.0, {"tabs": 14, "rare": 1})
    assert weights.idf[0] == IDF_FLOOR
    assert weights.idf[1] > 1.0
    assert query_weights(["x"], 0.0, 1.0, {"x": 3}).idf == [IDF_FLOOR]


def test_nul_characters_and_non_finite_numbers_are_stored_not_refused(
    open_store: Callable[[], PostgresStore],
) -> None:
    """SQLite takes both; PostgreSQL would refuse the statement (a client's turn lost)."""
    store = open_store()
    session = store.ensure_session("nul\x00key", namespace="n")
    raw = {"role": "user", "content": "tab\x00s", "temperature": float("nan"), "x\x00": [1e999]}
    store.append_messages(
        session.id, [NewMessage(Message("user", "tab\x00s", raw=raw, wire="chat"), 3)]
    )
    store.add_event(session.id, "stage.failed", {"error": "a\x00b", "took": float("inf")})
    (stored,) = store.list_messages(session.id)
    assert stored.message.text == "tab\ufffds"
    assert stored.message.raw == {
        "role": "user",
        "content": "tab\ufffds",
        "temperature": None,
        "x\ufffd": [None],
    }
    (event,) = store.list_events(session.id, kind="stage.failed")
    assert event.payload == {"error": "a\ufffdb", "took": None}
    assert store.find_session("nul\ufffdkey") is not None
