"""The SQLite keyword search's in-process index: FTS5's BM25, kept in step with the file."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane.store import NewEvent, SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite.doc_filter import MASKS_KEPT
from memlane.store.sqlite.keyword_index import TAIL_MIN, KeywordIndex
from memlane.store.sqlite.schema import DOC_CHANGES_KEPT
from memlane.types import Fact, FactRole
from tests.store.fts5_reference import fts5_reference

ROOT = Path(__file__).resolve().parents[2]
WORDS = [f"w{i}" for i in range(40)] + ["parse_config_file", "src/app/main.py", "E1234"]
STAMP = datetime(2026, 1, 1, tzinfo=UTC)


def dropped(text: str) -> NewEvent:
    return NewEvent("dropped", {}, text)


def fact(fact_id: str, text: str, *, scope: str = "ns", role: FactRole = "memory") -> Fact:
    return Fact(fact_id, scope, "conv", role, text, STAMP, STAMP)


def sentences(seed: int, count: int) -> Iterator[str]:
    """Texts of 1-30 words from a skewed vocabulary: common and rare terms, varied lengths."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    for _ in range(count):
        yield " ".join(rng.choices(WORDS, weights, k=rng.randint(1, 30)))


def ranking(store: SQLiteStore, query: str, limit: int) -> list[tuple[str, float]]:
    return [
        (h.ref, round(h.score, 9)) for h in store.keyword_search(query, SearchFilter(), limit=limit)
    ]


QUERIES = ["w0 w1", "w3 w17 w39", "w25", "parse_config_file w2", "src/app/main.py", "w0 E1234 w9"]


def assert_same_as_fts5(store: SQLiteStore, limit: int = 25) -> None:
    with fts5_reference(store.path) as fts5:
        for query in QUERIES:
            assert ranking(store, query, limit) == fts5.ranking(query, limit), query


def test_scores_and_order_equal_fts5s_bm25(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s", namespace="ns")
    store.add_events(session.id, [dropped(t) for t in sentences(1, 300)])
    for i, text in enumerate(sentences(2, 100)):
        store.put_fact(fact(f"f{i}", text, scope=f"scope{i % 3}"))
    store.add_event(session.id, "dropped", {}, text="w1 w1 w1 dropped history")
    assert_same_as_fts5(store)
    assert len(store.keyword_search("w0", SearchFilter(), limit=500)) > 100
    store.close()


def test_filters_scopes_sessions_kinds_roles_and_inactive_documents(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    a = store.ensure_session("a", namespace="ns-a")
    b = store.ensure_session("b", namespace="ns-b")
    store.add_events(a.id, [dropped("kiwi in a"), dropped("kiwi event")])
    store.add_event(b.id, "dropped", {}, text="kiwi in b")
    store.put_fact(fact("m", "kiwi memory", scope="ns-a"))
    store.put_fact(fact("s", "kiwi summary", scope="ns-a", role="summary"))
    store.put_fact(fact("gone", "kiwi deleted", scope="ns-a"))
    store.delete_fact("gone")

    def texts(flt: SearchFilter) -> set[str]:
        return {h.text for h in store.keyword_search("kiwi", flt, limit=50)}

    everything = {"kiwi in a", "kiwi event", "kiwi in b", "kiwi memory"}
    assert texts(SearchFilter()) == everything | {"kiwi summary"}
    assert texts(SearchFilter(scopes=("ns-b",))) == {"kiwi in b"}
    assert texts(SearchFilter(scopes=("nowhere",))) == set()
    assert texts(SearchFilter(session_id=b.id)) == {"kiwi in b"}
    assert texts(SearchFilter(session_id="no such session")) == set()
    assert texts(SearchFilter(kinds=("event",))) == {"kiwi in a", "kiwi event", "kiwi in b"}
    assert texts(SearchFilter(kinds=("fact",))) == {"kiwi memory", "kiwi summary"}
    assert texts(SearchFilter(kinds=("fact",), fact_roles=("memory",))) == {"kiwi memory"}
    assert texts(SearchFilter(kinds=("event", "fact"), scopes=("ns-a",), fact_roles=())) == {
        "kiwi in a",
        "kiwi event",
    }
    store.close()


def test_a_filter_asked_again_sees_documents_written_since(tmp_path: Path) -> None:
    """The index's own answer, before the SQL re-check: its filter masks are exact."""
    store = SQLiteStore(tmp_path / "memlane.db")
    raw = sqlite3.connect(store.path, isolation_level=None)
    index = KeywordIndex()

    def refs(flt: SearchFilter) -> list[str]:
        index.refresh(raw)
        found = [hit.rowid for hit in index.search(["heron"], flt, 50)]
        by_rowid = dict(raw.execute("SELECT rowid, ref FROM docs").fetchall())
        return sorted(by_rowid[rowid] for rowid in found)

    scoped = SearchFilter(kinds=("fact",), scopes=("ns", "global"), fact_roles=("memory",))
    store.put_fact(fact("a", "heron one"))
    assert refs(scoped) == ["a"]
    store.put_fact(fact("b", "heron two", scope="global"))
    store.put_fact(fact("c", "heron three", scope="elsewhere"))
    store.put_fact(fact("d", "heron four", role="summary"))
    session = store.ensure_session("s", namespace="ns")
    event = str(store.add_event(session.id, "dropped", {}, text="heron five").id)
    assert refs(scoped) == ["a", "b"]
    assert refs(SearchFilter(session_id=session.id)) == [event]
    store.delete_fact("a")
    assert refs(scoped) == ["b"]
    assert refs(SearchFilter(kinds=("fact",))) == ["b", "c", "d"]
    assert refs(SearchFilter(scopes=("nowhere",))) == []
    raw.close()
    store.close()


def test_a_refresh_that_finds_nothing_new_is_one_statement(tmp_path: Path) -> None:
    """The writer catches the index up after each batch: a search's refresh then asks
    whether anything is new and reads nothing more; a write, a change and a deletion
    since are each read."""
    store = SQLiteStore(tmp_path / "memlane.db")
    raw = sqlite3.connect(store.path, isolation_level=None)
    ran: list[str] = []
    raw.set_trace_callback(ran.append)
    index = KeywordIndex()
    flt = SearchFilter(kinds=("fact",))

    def found() -> int:
        index.refresh(raw)
        return len(index.search(["heron"], flt, 50))

    store.put_fact(fact("a", "heron one"))
    assert found() == 1
    ran.clear()
    assert found() == 1
    assert len(ran) == 1, ran
    store.put_fact(fact("b", "heron two"))
    assert found() == 2
    store.put_fact(fact("b", "a kite now"))
    assert found() == 1
    store.put_fact(fact("c", "heron three"))
    store.delete_fact("a")
    assert found() == 1
    raw.close()
    store.close()


def test_deleted_changed_and_purged_documents_leave_the_results_and_the_statistics(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    for i, text in enumerate(sentences(3, 60)):
        store.put_fact(fact(f"f{i}", text))
    assert_same_as_fts5(store)  # loaded
    store.put_fact(fact("f1", "okapi rewritten text"))
    store.delete_fact("f2")
    store.purge_fact("f3")
    store.put_fact(fact("f4", store.get_fact("f4").text, scope="elsewhere"))  # type: ignore[union-attr]
    assert [h.ref for h in store.keyword_search("okapi", SearchFilter())] == ["f1"]
    assert "f2" not in {
        h.ref for h in store.keyword_search("w0 w1 w2 w3", SearchFilter(), limit=99)
    }
    assert [
        h.ref for h in store.keyword_search("w0 w1 w2 w3", SearchFilter(scopes=("elsewhere",)))
    ] == ["f4"]
    assert_same_as_fts5(store)
    store.close()


ADD_EVENTS = """
import sys
from pathlib import Path
from memlane.store.sqlite import SQLiteStore
store = SQLiteStore(Path(sys.argv[1]))
session = store.ensure_session("shared")
for i in range(int(sys.argv[3])):
    store.add_event(session.id, "dropped", {}, text=f"{sys.argv[2]} event {i}")
store.close()
"""
"""Another process's writes: events of the session "shared", one write each."""


def test_writes_of_other_processes_are_seen(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    reader = SQLiteStore(db)
    other = SQLiteStore(db)  # another connection and cache: what another process has
    other.put_fact(fact("a", "yak grazing"))
    assert [h.ref for h in reader.keyword_search("yak", SearchFilter())] == ["a"]
    child = subprocess.run(
        [sys.executable, "-c", ADD_EVENTS, str(db), "yak", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert len(reader.keyword_search("yak", SearchFilter(kinds=("event",)))) == 3
    other.put_fact(fact("a", "llama grazing"))
    assert reader.keyword_search("yak", SearchFilter(kinds=("fact",))) == []
    assert [h.ref for h in reader.keyword_search("llama", SearchFilter())] == ["a"]
    session = other.find_session("shared")
    assert session is not None
    other.delete_session(session.id)
    assert reader.keyword_search("yak", SearchFilter()) == []
    assert_same_as_fts5(reader)
    reader.close()
    other.close()


def test_a_bulk_change_made_elsewhere_is_read_again(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    reader = SQLiteStore(db)
    other = SQLiteStore(db)
    for i in range(1200):
        other.put_fact(fact(f"f{i}", f"before {i}"))
    assert len(reader.keyword_search("before", SearchFilter(), limit=2000)) == 1200
    for i in range(1200):
        other.put_fact(fact(f"f{i}", f"after {i}"))
    assert reader.keyword_search("before", SearchFilter()) == []
    assert len(reader.keyword_search("after", SearchFilter(), limit=2000)) == 1200
    assert_same_as_fts5(reader)
    reader.close()
    other.close()


def test_many_small_writes_between_searches_keep_fts5s_ranking(tmp_path: Path) -> None:
    """New documents wait in a small tail, which is merged into the arrays as it grows."""
    store = SQLiteStore(tmp_path / "memlane.db")
    texts = list(sentences(4, TAIL_MIN * 2 + 300))
    step = 400
    previous: list[str] = []
    for first in range(0, len(texts), step):
        batch = [fact(f"f{first + i}", text) for i, text in enumerate(texts[first : first + step])]
        store.put_facts(batch)
        for fact_id in previous[:2]:  # documents the index holds already change
            store.put_fact(fact(fact_id, f"w5 {fact_id} changed"))
        if previous:
            store.delete_fact(previous[2])
        previous = [f.id for f in batch]
        assert_same_as_fts5(store, limit=10)
    assert len(ranking(store, "w0 w1", 10)) == 10
    store.close()


def test_writes_of_one_term_and_of_no_term_keep_fts5s_ranking(tmp_path: Path) -> None:
    """A write the index reads may hold one term in all, or documents with none (only
    stopwords): each is counted as FTS5 counts it."""
    store = SQLiteStore(tmp_path / "memlane.db")
    session = store.ensure_session("s", namespace="ns")
    store.add_events(session.id, [dropped(t) for t in sentences(6, 50)])
    assert_same_as_fts5(store)
    for text in ["w0", "the of", "w17", "E1234", "it is", "w0"]:
        store.add_events(session.id, [dropped(text)])
        assert_same_as_fts5(store)
    store.add_events(session.id, [dropped("the"), dropped("w3"), dropped("and so")])
    assert_same_as_fts5(store)
    assert ranking(store, "w17", 5)
    assert ranking(store, "w0 w1", 5)
    store.close()


def test_a_cache_behind_the_pruned_change_log_reloads(tmp_path: Path) -> None:
    db = tmp_path / "memlane.db"
    reader = SQLiteStore(db)
    other = SQLiteStore(db)
    for i in range(3):
        other.put_fact(fact(f"f{i}", "gnu herd"))
    assert len(reader.keyword_search("gnu", SearchFilter())) == 3
    for i in range(3):
        other.put_fact(fact(f"f{i}", "zebra herd"))
    with sqlite3.connect(db) as raw:  # as if pruned: only the newest change is left
        raw.execute("DELETE FROM doc_changes WHERE seq < (SELECT max(seq) FROM doc_changes)")
    raw.close()
    assert reader.keyword_search("gnu", SearchFilter()) == []
    assert len(reader.keyword_search("zebra", SearchFilter())) == 3
    reader.close()
    other.close()


def test_the_change_log_prunes_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    with sqlite3.connect(store.path) as raw:
        raw.executemany(
            "INSERT INTO doc_changes (doc_id) VALUES (?)", [(0,)] * (DOC_CHANGES_KEPT + 3000)
        )
        (count,) = raw.execute("SELECT count(*) FROM doc_changes").fetchone()
    raw.close()
    assert DOC_CHANGES_KEPT <= count <= DOC_CHANGES_KEPT + 1024
    store.close()


@pytest.mark.parametrize("limit", [1, 7])
def test_ties_come_oldest_first_as_in_fts5(tmp_path: Path, limit: int) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    for i in range(10):
        store.put_fact(Fact(f"f{i}", "ns", "c", "memory", "same text", STAMP + timedelta(i), STAMP))
    hits = store.keyword_search("same", SearchFilter(), limit=limit)
    assert [h.ref for h in hits] == [f"f{i}" for i in range(limit)]
    store.close()


def test_a_scoped_search_reads_only_its_scopes_and_still_ranks_as_fts5(tmp_path: Path) -> None:
    """Many scopes, entries moved between scopes and deleted: a search limited to a few
    scopes ranks exactly as FTS5 over those scopes' active documents."""
    store = SQLiteStore(tmp_path / "memlane.db")
    for i, text in enumerate(sentences(5, 600)):
        store.put_fact(fact(f"f{i}", text, scope=f"scope{i % 30}"))
    store.keyword_search("w0", SearchFilter(scopes=("scope1",)), limit=5)  # a cached mask
    for i, text in enumerate(sentences(6, 40)):
        store.put_fact(fact(f"f{i}", text, scope=f"scope{(i + 1) % 30}"))  # moved, rewritten
    for i in range(40, 60):
        store.delete_fact(f"f{i}")

    with fts5_reference(store.path) as fts5:
        for scopes in [("scope1",), ("scope1", "scope2", "scope29"), ("scope7", "nowhere")]:
            flt = SearchFilter(kinds=("fact",), scopes=scopes)
            for query in QUERIES:
                hits = store.keyword_search(query, flt, limit=25)
                assert [(h.ref, round(h.score, 9)) for h in hits] == fts5.ranking(
                    query, 25, scopes
                ), (scopes, query)
                assert {h.scope for h in hits} <= set(scopes)
    store.close()


def test_a_write_indexes_what_it_stored_so_the_next_search_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's thread catches the loaded index up after its commit: a search on a
    request's path then has no new documents to read first."""
    store = SQLiteStore(tmp_path / "m.db")
    store.put_fact(fact("a", "alpha"))
    store.keyword_search("alpha", SearchFilter())  # a first search loads the index
    registered: list[int] = []
    register = KeywordIndex._register

    def counting(index: KeywordIndex, rows: list[tuple[object, ...]]) -> object:
        registered.append(len(rows))
        return register(index, rows)

    monkeypatch.setattr(KeywordIndex, "_register", counting)

    store.put_facts([fact("b", "beta gamma"), fact("c", "beta delta")])
    assert registered == [2]  # by the write
    hits = store.keyword_search("beta", SearchFilter())
    assert registered == [2]  # the search found nothing left to read
    assert sorted(h.text for h in hits) == ["beta delta", "beta gamma"]
    store.close()


def test_a_write_does_not_load_an_index_no_search_has_read(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    store.put_fact(fact("a", "alpha"))
    assert not store._keywords.loaded  # a store that is only written never builds it
    assert [h.text for h in store.keyword_search("alpha", SearchFilter())] == ["alpha"]
    store.close()


def test_a_words_tail_is_read_in_place_and_keeps_what_a_search_was_given(
    tmp_path: Path,
) -> None:
    """A common word's tail postings (up to `TAIL_MIN` documents) are not copied on every
    search: a search reads views of the tail's arrays, and postings added later go past
    them, so what an earlier search was given keeps its values."""
    store = SQLiteStore(tmp_path / "memlane.db")
    store.put_facts([fact(f"f{i}", f"w0 note {i}") for i in range(50)])
    assert_same_as_fts5(store)
    index = store._keywords
    tail = index._tail[index._vocab["w0"]]
    docs, tfs = tail.part
    assert docs.shape[0] == 50
    before = (docs.copy(), tfs.copy())
    again = tail.part
    assert np.shares_memory(again[0], docs)  # nothing new: the same memory, no copy

    for i in range(20):  # enough to grow the arrays past their room
        store.put_fact(fact(f"g{i}", f"w0 w0 w1 again {i}"))
        assert_same_as_fts5(store)
    grown, grown_tfs = tail.part
    assert grown.shape[0] == 70
    assert (grown[:50] == before[0]).all()
    assert (grown_tfs[50:] == 2).all()
    assert (docs == before[0]).all()  # the earlier view is untouched
    assert (tfs == before[1]).all()
    store.close()


def test_a_cached_filter_drops_a_document_that_moved_to_another_scope(tmp_path: Path) -> None:
    """The index's own answer: a filter's cached mask forgets a document whose scope (its
    namespace) changed, or that was deleted, and counts only what passes."""
    store = SQLiteStore(tmp_path / "memlane.db")
    raw = sqlite3.connect(store.path, isolation_level=None)
    index = KeywordIndex()

    def refs(flt: SearchFilter) -> list[str]:
        index.refresh(raw)
        found = [hit.rowid for hit in index.search(["heron"], flt, 50)]
        by_rowid = dict(raw.execute("SELECT rowid, ref FROM docs").fetchall())
        return sorted(by_rowid[rowid] for rowid in found)

    in_a = SearchFilter(kinds=("fact",), scopes=("ns-a",))
    in_b = SearchFilter(kinds=("fact",), scopes=("ns-b",))
    everywhere = SearchFilter(kinds=("fact",))
    for name in "abc":
        store.put_fact(fact(name, f"heron {name}", scope="ns-a"))
    assert refs(in_a) == ["a", "b", "c"]
    assert refs(in_b) == []
    assert refs(everywhere) == ["a", "b", "c"]
    store.put_fact(fact("b", "heron b", scope="ns-b"))  # the same entry, another namespace
    store.delete_fact("c")
    assert refs(in_a) == ["a"]
    assert refs(in_b) == ["b"]
    assert refs(everywhere) == ["a", "b"]
    with index._lock:
        for flt, count in ((in_a, 1), (in_b, 1), (everywhere, 2)):
            passing = index._filter.passing(flt)
            assert passing is not None
            assert passing.count == count
    raw.close()
    store.close()


def test_more_filters_than_are_cached_each_keep_their_own_answer(tmp_path: Path) -> None:
    """Two hundred conversations asking in turn: each filter's answer stays its own when
    its cached mask has been dropped for others' and is computed again."""
    store = SQLiteStore(tmp_path / "memlane.db")
    conversations = [f"conv:{i}" for i in range(MASKS_KEPT * 3)]
    for round_ in range(2):
        for i, scope in enumerate(conversations):
            store.put_fact(fact(f"{scope}-{round_}", f"heron {i} round {round_}", scope=scope))
        for scope in conversations:
            flt = SearchFilter(kinds=("fact",), scopes=(scope, "ns"))
            found = {h.ref for h in store.keyword_search("heron", flt, limit=50)}
            assert found == {f"{scope}-{r}" for r in range(round_ + 1)}
    store.close()
