"""The `InspectorReads` role: the web inspector's bounded reads, run once per backend."""

from __future__ import annotations

from memlane.store import Store
from tests.store.contract.support import fact, user


def test_page_sessions_pages_newest_first_and_counts_all(store: Store) -> None:
    ids = [
        store.ensure_session(f"key-{i}", namespace="ns-a" if i % 2 else "ns-b").id for i in range(5)
    ]
    for session_id in ids:  # touched in order: the last one is the newest
        store.append_messages(session_id, [user("hello")])
    page, total = store.page_sessions(limit=2)
    assert total == 5
    assert [s.id for s in page] == [ids[4], ids[3]]
    page, total = store.page_sessions(offset=4, limit=2)
    assert [s.id for s in page] == [ids[0]]
    page, total = store.page_sessions(namespace="ns-a")
    assert total == 2
    assert {s.id for s in page} == {ids[1], ids[3]}
    assert store.session_namespaces() == [("ns-a", 2), ("ns-b", 3)]


def test_page_sessions_searches_title_key_and_metadata_literally(store: Store) -> None:
    a = store.ensure_session("alpha-key")
    b = store.ensure_session("beta-key")
    c = store.ensure_session("gamma_key")
    store.update_session(a.id, title="Fix the Walrus parser")
    store.update_session(b.id, metadata={"name": "job-queue", "tags": ["postgres"]})
    assert [s.id for s in store.page_sessions(query="walrus")[0]] == [a.id]
    assert [s.id for s in store.page_sessions(query="POSTGRES")[0]] == [b.id]
    assert [s.id for s in store.page_sessions(query="gamma_")[0]] == [c.id]
    # LIKE wildcards in the query are literal characters
    assert store.page_sessions(query="%")[1] == 0
    assert [s.id for s in store.page_sessions(query="a_k")[0]] == [c.id]  # not alpha-key
    assert store.page_sessions(query=c.id[:8])[0][0].id == c.id


def test_page_sessions_matches_metadata_values_never_its_keys_or_punctuation(
    store: Store,
) -> None:
    indexed = store.ensure_session("one")
    other = store.ensure_session("two")
    meta = {
        "name": "orders-database",
        "description": "Picking the orders database",
        "summary": "We chose PostgreSQL.",
        "tags": ["storage", "pg"],
        "indexed_at": "2026-03-01T10:00:00+00:00",
        "index_cost_usd": 0.002,
        "nested": {"deep": "hidden-value"},
    }
    store.update_session(indexed.id, metadata=meta)
    store.update_session(other.id, metadata={"name": "release-notes", "tags": "music"})
    for query in ("name", "tags", "summary", "indexed_at", "{", "}", '"', ":", "[", ",", "0.002"):
        assert store.page_sessions(query=query) == ([], 0), query
    assert store.page_sessions(query="hidden-value")[1] == 0  # not a field a person reads
    for query in ("ORDERS-DATA", "picking the", "postgresql", "storage", "pg"):
        assert [s.id for s in store.page_sessions(query=query)[0]] == [indexed.id], query
    assert [s.id for s in store.page_sessions(query="music")[0]] == [other.id]  # a lone tag


def test_page_facts_by_scope_newest_first_without_tombstones(store: Store) -> None:
    for i in range(4):
        store.put_fact(fact(f"f{i}", f"fact {i}", scope="ns:a", minutes=i))
    store.put_fact(fact("g", "global fact", scope="global", minutes=9))
    store.delete_fact("f1")
    page, total = store.page_facts(scope="ns:a")
    assert total == 3
    assert [f.id for f in page] == ["f3", "f2", "f0"]
    page, total = store.page_facts(scope="ns:a", include_deleted=True, offset=1, limit=2)
    assert total == 4
    assert [f.id for f in page] == ["f2", "f1"]
    page, total = store.page_facts(limit=2)
    assert total == 4
    assert [f.id for f in page] == ["g", "f3"]
    assert store.fact_scopes() == [("global", 1), ("ns:a", 3)]


def test_recent_events_across_sessions_by_kind(store: Store) -> None:
    one = store.ensure_session("one")
    two = store.ensure_session("two")
    first = store.add_event(one.id, "turn", {"n": 1})
    store.add_event(two.id, "other", {"n": 2})
    third = store.add_event(two.id, "turn", {"n": 3})
    assert [e.id for e in store.recent_events(kinds=["turn"])] == [third.id, first.id]
    assert [e.id for e in store.recent_events(kinds=["turn"], after_id=first.id)] == [third.id]
    assert [e.session_id for e in store.recent_events(kinds=["turn", "other"], limit=2)] == [
        two.id,
        two.id,
    ]


def test_daily_counts_add_up_per_day(store: Store) -> None:
    store.add_daily_counts("2026-03-01", {"requests": 2, "errors": 0})
    store.add_daily_counts("2026-03-01", {"requests": 1, "errors": 1})
    store.add_daily_counts("2026-03-02", {"requests": 5})
    store.add_daily_counts("2026-02-28", {"requests": 7})
    assert store.daily_counts(since="2026-03-01") == {
        "2026-03-01": {"requests": 3, "errors": 1},
        "2026-03-02": {"requests": 5},
    }
