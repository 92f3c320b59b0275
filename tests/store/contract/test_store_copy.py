"""Whole tables out and in: a dump loads into a fresh store of any backend, ids kept.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from memlane.store import (
    TABLES,
    NewMessage,
    SearchFilter,
    Store,
    StoreCopy,
    StoreError,
)
from memlane.types import Citations, CitedFile, Message
from tests.store.conftest import StoreFactory
from tests.store.contract.support import MODEL, fact, unit, user


def test_dump_and_load_round_trip(store_factory: StoreFactory) -> None:
    source = store_factory()
    session = source.ensure_session("s", namespace="ns")
    source.update_session(
        session.id, title="T", metadata={"tags": ["a"], "summary": "the walrus plan"}, summary="sum"
    )
    source.add_usage(session.id, prompt_tokens=5, completion_tokens=6, cost_usd=0.01)
    raw = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    first = Message(role="user", text="hi there", raw=raw, wire="responses")
    source.sync_messages(session.id, [NewMessage(first, 3), user("second question")])
    source.sync_messages(session.id, [NewMessage(first, 3), user("edited question")])
    source.add_event(session.id, "dropped", {"ids": [1]}, text="dropped walrus history")
    source.set_state(session.id, "todo", "- [ ] x")
    source.put_fact(fact("f1", "walrus fact", conversation_id=session.id))
    source.put_fact(fact("f2", "old walrus fact", minutes=1))
    source.delete_fact("f2", replaced_by="f1")
    cites = Citations("/r", (CitedFile("a.py", "git:" + "a" * 40),), fact("x", "").created_at)
    linked = replace(fact("f3", "linked walrus fact", minutes=2), source_turns=("t9",))
    source.put_fact(replace(linked, cites=cites))
    source.put_vectors("fact", [("f1", unit(1))], model=MODEL)
    event_ref = str(source.list_events(session.id)[0].id)
    source.put_vectors("event", [(event_ref, unit(2))], model=MODEL)
    source.set_meta("embedding_model", MODEL)
    source.add_daily_counts("2026-01-01", {"requests": 3, "errors": 1})
    fork = source.fork_session(session.id, new_key="fork", at_position=1)

    target = store_factory()
    for table in TABLES:
        target.load(table, list(source.dump(table)))
    for table in TABLES:
        assert target.count(table) == source.count(table), table
        assert list(target.dump(table)) == list(source.dump(table)), table

    assert target.get_session(session.id) == source.get_session(session.id)
    assert target.get_session(fork.id) == source.get_session(fork.id)
    assert target.list_messages(session.id, include_superseded=True) == source.list_messages(
        session.id, include_superseded=True
    )
    assert target.list_messages(session.id)[0].message.raw == raw
    assert target.list_events(session.id) == source.list_events(session.id)
    assert target.get_state(session.id) == {"todo": "- [ ] x"}
    assert target.get_fact("f2") == source.get_fact("f2")
    assert target.get_fact("f3").source_turns == ("t9",)  # type: ignore[union-attr]
    assert target.get_fact("f3").cites == cites  # type: ignore[union-attr]
    assert target.get_meta("embedding_model") == MODEL
    assert target.daily_counts(since="2026-01-01") == {"2026-01-01": {"errors": 1, "requests": 3}}
    flt = SearchFilter()
    assert target.keyword_search("walrus", flt) == source.keyword_search("walrus", flt)
    assert target.keyword_search("second", flt) == []
    plans = SearchFilter(kinds=("session",), scopes=("ns:ns",))
    assert {h.ref for h in target.keyword_search("walrus plan", plans)} == {session.id, fork.id}
    copied = target.vector_search(unit(2), flt, model=MODEL)
    assert copied == source.vector_search(unit(2), flt, model=MODEL)
    assert copied[0].ref == event_ref
    appended = target.append_messages(session.id, [user("after the copy")])
    assert appended[0].id > max(
        m.id for m in source.list_messages(session.id, include_superseded=True)
    )


def test_unknown_table_is_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        store.count("docs; DROP TABLE sessions")
    with pytest.raises(StoreError):
        list(store.dump("nope"))


def test_backend_plays_the_store_copy_role(store: Store) -> None:
    assert isinstance(store, StoreCopy)
    assert isinstance(store, Store)
    assert store.url


def test_loaded_turns_are_indexed_with_their_neighbours_as_stored_ones(
    store_factory: StoreFactory,
) -> None:
    source = store_factory()
    said = ["did you see the aurora?", "yes, last tuesday", "over tromso", "lovely", "bye"]
    for minute, text in enumerate(said):
        source.put_fact(fact(f"t{minute}", text, role="user", minutes=minute))
    source.put_fact(fact("m", "the aurora is green", minutes=9))
    rows = list(source.dump("facts"))
    target = store_factory()
    target.load("facts", rows[:2])  # a conversation split across two batches
    target.load("facts", rows[2:])
    flt = SearchFilter()
    for query in ("aurora", "tuesday tromso", "lovely bye", "green"):
        assert target.keyword_search(query, flt) == source.keyword_search(query, flt), query
    assert {h.ref for h in target.keyword_search("aurora", flt)} >= {"t0", "t1", "t2", "m"}
