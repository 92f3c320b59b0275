"""Facts with time: validity stored and read back, searches held to a moment, deletes dated.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memlane.store import SearchFilter, Store
from memlane.store.migrate import copy_store
from tests.store.conftest import StoreFactory
from tests.store.contract.support import MODEL, fact, unit

JAN = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
FEB = datetime(2026, 2, 15, tzinfo=UTC)
MAR = datetime(2026, 3, 10, 18, 30, tzinfo=UTC)
LATER = datetime(2027, 6, 1, tzinfo=UTC)


def berlin_then_lisbon(store: Store) -> None:
    berlin = replace(
        fact("berlin", "The user lives in Berlin"), valid_from=JAN, valid_to=MAR, replaced_by="lis"
    )
    lisbon = replace(fact("lis", "The user lives in Lisbon"), valid_from=MAR, supersedes="berlin")
    store.put_fact(berlin)
    store.put_fact(lisbon)
    store.put_vectors("fact", [("berlin", unit(1)), ("lis", unit(2))], model=MODEL)


def test_validity_and_links_round_trip(store: Store) -> None:
    berlin_then_lisbon(store)
    berlin, lisbon = store.get_fact("berlin"), store.get_fact("lis")
    assert berlin is not None
    assert lisbon is not None
    assert (berlin.valid_from, berlin.valid_to, berlin.replaced_by) == (JAN, MAR, "lis")
    assert (lisbon.valid_from, lisbon.valid_to, lisbon.supersedes) == (MAR, None, "berlin")
    assert not berlin.deleted  # closed, not deleted: still listed
    assert [f.id for f in store.list_facts()] == ["berlin", "lis"]
    store.put_fact(fact("plain", "The user likes tea"))
    unset = store.get_fact("plain")
    assert unset is not None
    assert (unset.valid_from, unset.valid_to, unset.supersedes) == (None, None, None)
    assert unset.since == unset.created_at


def test_searches_hold_facts_to_the_moment_asked(store: Store) -> None:
    berlin_then_lisbon(store)
    session = store.ensure_session("k", namespace="repo-a")
    store.add_event(session.id, "dropped", {}, text="the user lives near the river")

    def keyword(at: datetime | None) -> set[str]:
        hits = store.keyword_search("user lives", SearchFilter(valid_at=at), limit=10)
        return {h.ref for h in hits}

    event = {str(e.id) for e in store.list_events(session.id)}
    assert keyword(LATER) == {"lis"} | event  # messages and events are never held to it
    assert keyword(FEB) == {"berlin"} | event
    assert keyword(MAR) == {"lis"} | event  # the boundary belongs to the new version
    assert keyword(JAN - timedelta(days=1)) == event  # neither was true yet
    assert keyword(None) == {"berlin", "lis"} | event  # a question about change sees both

    def dense(at: datetime | None) -> list[str]:
        flt = SearchFilter(kinds=("fact",), valid_at=at)
        return [h.ref for h in store.vector_search(unit(1), flt, model=MODEL, limit=5)]

    assert dense(LATER) == ["lis"]
    assert dense(FEB) == ["berlin"]
    assert dense(None) == ["berlin", "lis"]


def test_a_search_at_a_moment_fills_its_limit_past_closed_versions(store: Store) -> None:
    for n in range(30):  # many replaced versions that match better than the current fact
        start = JAN + timedelta(days=n)
        store.put_fact(
            replace(
                fact(f"old{n}", f"deploy deploy target {n}", minutes=n),
                valid_from=start,
                valid_to=start + timedelta(days=1),
            )
        )
    store.put_fact(fact("now1", "deploy target is production", minutes=40))
    store.put_fact(fact("now2", "deploy window on friday", minutes=41))
    hits = store.keyword_search("deploy", SearchFilter(valid_at=LATER), limit=2)
    assert {h.ref for h in hits} == {"now1", "now2"}


def test_a_fact_not_yet_true_is_not_found_now(store: Store) -> None:
    store.put_fact(replace(fact("next", "The user starts at ACME"), valid_from=LATER))
    assert store.keyword_search("ACME", SearchFilter(valid_at=MAR)) == []
    assert [h.ref for h in store.keyword_search("ACME", SearchFilter(valid_at=LATER))] == ["next"]


def test_a_delete_ends_the_validity_at_its_moment(store: Store) -> None:
    store.put_fact(replace(fact("tea", "The user likes tea"), valid_from=JAN))
    store.put_fact(replace(fact("dog", "The user has a dog"), valid_from=JAN))
    assert store.delete_fact("tea", at=MAR)
    assert store.delete_fact("dog")
    tea, dog = store.get_fact("tea"), store.get_fact("dog")
    assert tea is not None
    assert dog is not None
    assert (tea.deleted, tea.valid_to) == (True, MAR)
    assert dog.valid_to is not None
    assert dog.valid_to > MAR
    # deleted means gone: not found even at a moment when it was true
    assert store.keyword_search("tea", SearchFilter(valid_at=FEB)) == []
    assert store.keyword_search("tea", SearchFilter()) == []
    # a fact closed earlier keeps the moment it was closed
    store.put_fact(replace(fact("old", "The user lived in Rome"), valid_from=JAN, valid_to=FEB))
    assert store.delete_fact("old", at=MAR)
    old = store.get_fact("old")
    assert old is not None
    assert old.valid_to == FEB


def test_validity_survives_a_copy(store: Store, store_factory: StoreFactory) -> None:
    berlin_then_lisbon(store)
    store.put_fact(replace(fact("tea", "The user likes tea"), valid_from=JAN))
    store.delete_fact("tea", at=FEB)
    dumped = {r["id"]: r for r in store.dump("facts")}
    assert (dumped["lis"]["supersedes"], dumped["berlin"]["replaced_by"]) == ("berlin", "lis")
    other = store_factory()
    copy_store(store, other)
    for fact_id in ("berlin", "lis", "tea"):
        assert other.get_fact(fact_id) == store.get_fact(fact_id)
    for at in (FEB, LATER):
        flt = SearchFilter(valid_at=at)
        assert [h.ref for h in other.keyword_search("lives", flt)] == [
            h.ref for h in store.keyword_search("lives", flt)
        ]
