"""Long-term memory entries: put, read back, list, tombstone.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memlane.store import (
    FactStore,
    SearchFilter,
    Store,
)
from memlane.types import Citations, CitedFile
from tests.store.contract.support import MODEL, fact, unit


def test_facts_put_get_list_and_replace(store: Store) -> None:
    store.put_fact(fact("f1", "The user prefers tabs", minutes=1))
    store.put_fact(fact("f2", "The project uses uv", scope="repo-b", minutes=2))
    store.put_fact(fact("f3", "Said hello", role="user", conversation_id="other", minutes=3))
    assert store.get_fact("f1") == fact("f1", "The user prefers tabs", minutes=1)
    assert store.get_fact("nope") is None
    assert [f.id for f in store.list_facts()] == ["f1", "f2", "f3"]
    assert [f.id for f in store.list_facts(scope="repo-a")] == ["f1", "f3"]
    assert [f.id for f in store.list_facts(conversation_id="other")] == ["f3"]
    assert [f.id for f in store.list_facts(roles=["user"])] == ["f3"]
    assert [f.id for f in store.list_facts(limit=2)] == ["f1", "f2"]
    assert [f.id for f in store.list_facts(ids=["f3", "f1", "none"])] == ["f1", "f3"]
    assert store.list_facts(ids=[]) == []
    store.put_fact(fact("f1", "The user prefers spaces", minutes=1))
    assert store.get_fact("f1") == fact("f1", "The user prefers spaces", minutes=1)
    assert store.keyword_search("tabs", SearchFilter()) == []
    assert [h.ref for h in store.keyword_search("spaces", SearchFilter())] == ["f1"]


def test_fact_tombstones_stay_readable_and_leave_the_index(store: Store) -> None:
    store.put_fact(fact("old", "deploys go through staging"))
    store.put_fact(fact("new", "deploys go straight to production", minutes=1))
    store.put_vectors("fact", [("old", unit(1)), ("new", unit(2))], model=MODEL)
    assert store.delete_fact("old", replaced_by="new")
    tomb = store.get_fact("old")
    assert tomb is not None
    assert (tomb.deleted, tomb.replaced_by) == (True, "new")
    assert [f.id for f in store.list_facts()] == ["new"]
    assert [f.id for f in store.list_facts(include_deleted=True)] == ["old", "new"]
    assert [h.ref for h in store.keyword_search("staging deploys", SearchFilter())] == ["new"]
    hits = store.vector_search(unit(1), SearchFilter(), model=MODEL, limit=5)
    assert [h.ref for h in hits] == ["new"]
    assert store.missing_vectors("fact", model="other") == [
        ("new", "deploys go straight to production")
    ]
    assert not store.delete_fact("missing")
    assert store.purge_fact("old")
    assert store.get_fact("old") is None
    assert not store.purge_fact("old")


def test_a_tombstone_keeps_the_time_it_was_given(store: Store) -> None:
    """A tombstone file's own time: the index says what the file says."""
    store.put_fact(fact("f1", "short-lived"))
    when = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    assert store.delete_fact("f1", updated_at=when)
    tomb = store.get_fact("f1")
    assert tomb is not None
    assert tomb.updated_at == when


def test_backend_plays_the_fact_store_role(store: Store) -> None:
    assert isinstance(store, FactStore)


def test_a_fact_keeps_the_turns_it_came_from_until_it_is_deleted(store: Store) -> None:
    said = fact("t1", "I married Anne", role="user")
    linked = replace(fact("f1", "The user's wife is Anne", minutes=1), source_turns=("t1", "t0"))
    store.put_fact(said)
    store.put_fact(linked)
    assert store.get_fact("f1") == linked  # in order, as recorded
    assert store.get_fact("t1").source_turns == ()  # type: ignore[union-attr]
    assert [f.source_turns for f in store.list_facts(roles=["memory"])] == [("t1", "t0")]
    store.put_fact(replace(linked, source_turns=()))
    assert store.get_fact("f1").source_turns == ()  # type: ignore[union-attr]
    store.put_fact(linked)
    assert store.delete_fact("f1")
    assert store.get_fact("f1").source_turns == ()  # type: ignore[union-attr]
    store.put_fact(replace(linked, id="f2"))
    assert store.purge_fact("f2")
    assert store.get_fact("f2") is None


def test_a_fact_keeps_the_files_it_cites(store: Store) -> None:
    cites = Citations(
        root="/home/u/src/api",
        files=(CitedFile("conf/app.toml", "git:" + "a" * 40),),
        noted_at=datetime(2026, 11, 2, 9, 30, tzinfo=UTC),
        head="c" * 40,
    )
    citing = replace(fact("f1", "The config lives in conf/app.toml"), cites=cites)
    store.put_fact(citing)
    store.put_fact(fact("f2", "The user prefers tabs", minutes=1))
    assert store.get_fact("f1") == citing
    assert [f.cites for f in store.list_facts()] == [cites, None]
    confirmed = replace(cites, head=None, noted_at=datetime(2026, 11, 3, tzinfo=UTC))
    store.put_fact(replace(citing, cites=confirmed))
    assert store.get_fact("f1").cites == confirmed  # type: ignore[union-attr]
