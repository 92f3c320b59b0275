"""The behaviour every `Store` backend owes, run once per backend (see conftest.STORE_BACKENDS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.store import (
    TABLES,
    NewEvent,
    NewMessage,
    SearchFilter,
    SessionNotFound,
    Store,
    StoreError,
    Vector,
)
from memlane.types import Fact, Message, ToolCall
from tests.store.conftest import StoreFactory

MODEL = "test-model"


def user(text: str) -> NewMessage:
    return NewMessage(Message(role="user", text=text, wire="chat"), token_count=len(text.split()))


def assistant(text: str) -> NewMessage:
    return NewMessage(Message(role="assistant", text=text, wire="chat"))


def texts(store: Store, session_id: str, **kwargs: bool) -> list[str]:
    return [m.message.text for m in store.list_messages(session_id, **kwargs)]


def fact(
    fact_id: str,
    text: str,
    *,
    scope: str = "repo-a",
    conversation_id: str = "conv",
    role: str = "memory",
    minutes: int = 0,
) -> Fact:
    stamp = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return Fact(
        id=fact_id,
        scope=scope,
        conversation_id=conversation_id,
        role=role,  # type: ignore[arg-type]
        text=text,
        created_at=stamp,
        updated_at=stamp,
        content_hash=f"h-{fact_id}",
    )


def unit(seed: int, dim: int = 16) -> Vector:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


# --- sessions ------------------------------------------------------------------------


def test_ensure_session_creates_once_and_defaults_namespace_to_key(store: Store) -> None:
    first = store.ensure_session("chat-1")
    again = store.ensure_session("chat-1", namespace="ignored")
    other = store.ensure_session("chat-2", namespace="repo")
    assert first.id == again.id
    assert first.namespace == "chat-1"
    assert other.namespace == "repo"
    assert first.created_at.tzinfo is not None
    assert store.get_session(first.id) == first
    assert store.find_session("chat-2") == other
    assert store.find_session("nope") is None
    assert store.get_session("nope") is None


def test_list_sessions_newest_activity_first_and_by_namespace(store: Store) -> None:
    a = store.ensure_session("a", namespace="ns1")
    b = store.ensure_session("b", namespace="ns2")
    c = store.ensure_session("c", namespace="ns1")
    assert [s.key for s in store.list_sessions()] == ["c", "b", "a"]
    store.append_messages(a.id, [user("hello")])
    assert [s.key for s in store.list_sessions()] == ["a", "c", "b"]
    assert [s.key for s in store.list_sessions(namespace="ns1")] == ["a", "c"]
    assert [s.key for s in store.list_sessions(limit=1)] == ["a"]
    assert store.list_sessions(namespace="none") == []
    assert {b.id, c.id} < {s.id for s in store.list_sessions()}


def test_update_session_sets_only_given_fields(store: Store) -> None:
    session = store.ensure_session("s")
    updated = store.update_session(session.id, title="Title", metadata={"tags": ["x"], "n": 1})
    assert updated.title == "Title"
    assert updated.metadata == {"tags": ["x"], "n": 1}
    updated = store.update_session(session.id, summary="so far", summarized_count=4)
    assert (updated.title, updated.summary, updated.summarized_count) == ("Title", "so far", 4)
    assert updated.metadata == {"tags": ["x"], "n": 1}
    assert updated.updated_at >= session.updated_at
    with pytest.raises(SessionNotFound):
        store.update_session("missing", title="x")


def test_usage_counters_accumulate(store: Store) -> None:
    session = store.ensure_session("s")
    store.add_usage(session.id, prompt_tokens=100, completion_tokens=20, cost_usd=0.5)
    store.add_usage(session.id, prompt_tokens=1, completion_tokens=2, cost_usd=0.25)
    got = store.get_session(session.id)
    assert got is not None
    assert (got.prompt_tokens, got.completion_tokens) == (101, 22)
    assert got.cost_usd == pytest.approx(0.75)


# --- messages ------------------------------------------------------------------------


def test_append_and_read_back_in_order_with_every_field(store: Store) -> None:
    session = store.ensure_session("s")
    raw = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "x": [1, "é"]}]}
    call = Message(
        role="assistant",
        kind="tool_call",
        tool_calls=(ToolCall("c1", "read_file", '{"path": "a.py"}'),),
        raw=raw,
        wire="chat",
    )
    result = Message(role="tool", kind="tool_result", text="print(1)", call_id="c1", name="read")
    stored = store.append_messages(
        session.id, [user("first"), NewMessage(call, 7), NewMessage(result, 3)]
    )
    assert [m.position for m in stored] == [0, 1, 2]
    back = store.list_messages(session.id)
    assert [m.id for m in back] == [m.id for m in stored]
    assert back[1].message == call
    assert back[1].message.raw == raw
    assert back[1].token_count == 7
    assert back[2].message == result
    assert back[0].content_hash == back[0].message.fingerprint()
    assert back[0].status == "ok"
    assert back[0].created_at.tzinfo is not None
    more = store.append_messages(session.id, [assistant("done")])
    assert more[0].position == 3
    assert store.list_messages(session.id, since_position=2)[0].message == result
    assert texts(store, session.id, transcript_only=True) == ["first", "done"]
    got = store.get_session(session.id)
    assert got is not None
    assert got.message_count == 4


def test_append_to_unknown_session_fails(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.append_messages("missing", [user("x")])


def test_sync_stores_a_resent_history_once(store: Store) -> None:
    session = store.ensure_session("s")
    first = store.sync_messages(session.id, [user("hi")])
    assert (first.matched, len(first.added), first.superseded) == (0, 1, 0)
    store.append_messages(session.id, [assistant("hello!")])
    second = store.sync_messages(session.id, [user("hi"), assistant("hello!"), user("how?")])
    assert (second.matched, [m.message.text for m in second.added]) == (2, ["how?"])
    assert second.added[0].position == 2
    retry = store.sync_messages(session.id, [user("hi"), assistant("hello!"), user("how?")])
    assert (retry.matched, retry.added, retry.superseded) == (3, (), 0)
    assert texts(store, session.id) == ["hi", "hello!", "how?"]


def test_sync_keeps_a_message_said_twice(store: Store) -> None:
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("yes")])
    store.append_messages(session.id, [assistant("sure?")])
    result = store.sync_messages(session.id, [user("yes"), assistant("sure?"), user("yes")])
    assert len(result.added) == 1
    assert texts(store, session.id) == ["yes", "sure?", "yes"]


def test_sync_divergence_supersedes_the_stored_tail(store: Store) -> None:
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
    result = store.sync_messages(session.id, [user("q1"), assistant("a1"), user("q2 edited")])
    assert (result.matched, result.superseded) == (2, 2)
    assert texts(store, session.id) == ["q1", "a1", "q2 edited"]
    everything = store.list_messages(session.id, include_superseded=True)
    assert [(m.message.text, m.status) for m in everything] == [
        ("q1", "ok"),
        ("a1", "ok"),
        ("q2", "superseded"),
        ("a2", "superseded"),
        ("q2 edited", "ok"),
    ]
    assert everything[-1].position > everything[-2].position
    got = store.get_session(session.id)
    assert got is not None
    assert got.message_count == 3


def test_sync_ignores_memlane_origin_messages_when_matching(store: Store) -> None:
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("q1")])
    note = Message(role="system", text="state block", origin="state")
    store.append_messages(session.id, [NewMessage(note), assistant("a1")])
    result = store.sync_messages(session.id, [user("q1"), assistant("a1"), user("q2")])
    assert (result.matched, result.superseded) == (2, 0)
    assert texts(store, session.id) == ["q1", "state block", "a1", "q2"]


def test_failed_messages_are_not_matched_and_status_can_change(store: Store) -> None:
    session = store.ensure_session("s")
    stored = store.sync_messages(session.id, [user("q1"), assistant("a1")]).added
    store.set_message_status(stored[1].id, "failed")
    result = store.sync_messages(session.id, [user("q1"), assistant("a1 retried")])
    assert (result.matched, result.superseded) == (1, 0)
    statuses = [m.status for m in store.list_messages(session.id)]
    assert statuses == ["ok", "failed", "ok"]
    with pytest.raises(StoreError):
        store.set_message_status(stored[0].id, "bogus")


# --- events and state -----------------------------------------------------------------


def test_events_append_and_list_oldest_first(store: Store) -> None:
    session = store.ensure_session("s")
    first = store.add_event(session.id, "dropped", {"ids": [1, 2]}, text="old turns about parsing")
    store.add_event(session.id, "offload", {"path": "out/1.txt"})
    third = store.add_event(session.id, "dropped", {"ids": [3]})
    assert first.payload == {"ids": [1, 2]}
    assert [e.kind for e in store.list_events(session.id)] == ["dropped", "offload", "dropped"]
    assert [e.id for e in store.list_events(session.id, kind="dropped")] == [first.id, third.id]
    newest = store.list_events(session.id, limit=2)
    assert [e.kind for e in newest] == ["offload", "dropped"]
    assert store.list_events(session.id)[0] == first
    hits = store.keyword_search("parsing", SearchFilter(kinds=("event",)))
    assert [h.ref for h in hits] == [str(first.id)]


def test_events_added_together_keep_their_order_and_are_searchable(store: Store) -> None:
    session = store.ensure_session("s")
    added = store.add_events(
        session.id,
        [
            NewEvent("dropped", {"index": 4}, "user: the walrus config lives in conf/w.toml"),
            NewEvent("offload", {"path": "out/2.txt"}),
            NewEvent("dropped", {"index": 5}, "assistant: walrus noted"),
        ],
    )
    assert [e.payload for e in added] == [{"index": 4}, {"path": "out/2.txt"}, {"index": 5}]
    assert store.list_events(session.id) == added
    hits = store.keyword_search("walrus config", SearchFilter(kinds=("event",)))
    assert [h.ref for h in hits] == [str(added[0].id), str(added[2].id)]
    assert store.add_events(session.id, []) == []
    with pytest.raises(SessionNotFound):
        store.add_events("no-such-session", [NewEvent("dropped", {})])
    assert len(store.list_events(session.id)) == 3


def test_state_set_replace_and_remove(store: Store) -> None:
    session = store.ensure_session("s")
    store.set_state(session.id, "todo", "- [ ] a")
    store.set_state(session.id, "pinned", "keep")
    store.set_state(session.id, "todo", "- [x] a")
    assert store.get_state(session.id) == {"todo": "- [x] a", "pinned": "keep"}
    store.set_state(session.id, "pinned", None)
    assert store.get_state(session.id) == {"todo": "- [x] a"}
    assert store.get_state("missing") == {}


# --- facts ----------------------------------------------------------------------------


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


# --- keyword search -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("src/app/main.py", "m-path"),
        ("parse_config_file", "m-snake"),
        ("loadUserProfile", "m-camel"),
        ("E1234", "m-code"),
        ("main.py", "m-path"),
        ("profile", "m-camel"),
    ],
)
def test_keyword_search_finds_identifiers(store: Store, query: str, expected: str) -> None:
    docs = {
        "m-path": "the bug is in src/app/main.py near the top",
        "m-snake": "call parse_config_file before starting",
        "m-camel": "loadUserProfile returns None for guests",
        "m-code": "the linter reports E1234 on every line",
        "m-other": "E1235 is a different warning about src/app/other.py",
    }
    for ref, text in docs.items():
        store.put_fact(fact(ref, text))
    hits = store.keyword_search(query, SearchFilter(), limit=3)
    assert hits
    assert hits[0].ref == expected
    assert all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)


def test_keyword_search_ranks_and_filters(store: Store) -> None:
    a = store.ensure_session("a", namespace="repo-a")
    b = store.ensure_session("b", namespace="repo-b")
    store.append_messages(a.id, [user("the parser crashes on unicode input")])
    store.append_messages(b.id, [user("the parser is fast")])
    store.put_fact(fact("f", "the parser crashes when given unicode", scope="repo-a"))
    store.put_fact(fact("s", "parser summary", scope="repo-a", role="summary"))

    everything = store.keyword_search("parser unicode crash", SearchFilter(), limit=10)
    assert {h.ref for h in everything[:2]} == {"f", store.list_messages(a.id)[0].id.__str__()}
    assert len(everything) == 4
    scoped = store.keyword_search("parser", SearchFilter(scopes=("repo-b",)))
    assert [(h.kind, h.session_id, h.scope) for h in scoped] == [("message", b.id, "repo-b")]
    by_session = store.keyword_search("parser", SearchFilter(session_id=a.id))
    assert {h.session_id for h in by_session} == {a.id}
    assert {h.kind for h in by_session} == {"message"}
    facts_only = store.keyword_search("parser", SearchFilter(kinds=("fact",)))
    assert {h.ref for h in facts_only} == {"f", "s"}
    memories = store.keyword_search("parser", SearchFilter(kinds=("fact",), fact_roles=("memory",)))
    assert [h.ref for h in memories] == ["f"]
    assert store.keyword_search("parser", SearchFilter(scopes=())) == []
    assert store.keyword_search("", SearchFilter()) == []
    assert store.keyword_search("the of and", SearchFilter()) == []
    assert store.keyword_search('"parser" OR (NEAR', SearchFilter())  # no query syntax leaks
    assert everything[0].created_at.tzinfo is not None


def test_fact_documents_belong_to_their_conversation(store: Store) -> None:
    session = store.ensure_session("s", namespace="repo-a")
    store.put_fact(fact("f", "uses poetry", conversation_id=session.id))
    hits = store.keyword_search("poetry", SearchFilter(session_id=session.id))
    assert [(h.kind, h.ref, h.scope, h.session_id) for h in hits] == [
        ("fact", "f", "repo-a", session.id)
    ]


def turn(fact_id: str, text: str, minutes: int, role: str = "user") -> Fact:
    return fact(fact_id, text, scope="conv:c", conversation_id="c", role=role, minutes=minutes)


def test_a_turn_is_found_by_its_neighbours_words_and_shown_alone(store: Store) -> None:
    store.put_fact(turn("t1", "We adopted a greyhound last week", 0))
    store.put_fact(turn("t2", "What did you name her?", 1, role="assistant"))
    store.put_fact(turn("t3", "Biscuit, after her colour", 2))
    store.put_fact(fact("m", "The user has a dog", scope="conv:c", conversation_id="c", minutes=3))
    flt = SearchFilter(kinds=("fact",))
    found = {h.ref: h.text for h in store.keyword_search("greyhound", flt)}
    # t2 and t3 hold "greyhound" only through t1, their earlier neighbour
    assert set(found) == {"t1", "t2", "t3"}
    assert found["t3"] == "Biscuit, after her colour"  # the hit is the turn itself
    # the turn's own words outrank its neighbours'
    assert store.keyword_search("greyhound", flt)[0].ref == "t1"
    assert [h.ref for h in store.keyword_search("name", flt)][:1] == ["t2"]
    assert "t1" in {h.ref for h in store.keyword_search("name", flt)}  # its next turn
    assert [h.ref for h in store.keyword_search("dog", flt)] == ["m"]  # facts stand alone
    # the date words of the turn's day are indexed
    assert {h.ref for h in store.keyword_search("January 2026", flt)} == {"t1", "t2", "t3"}


def test_a_turn_that_arrives_late_joins_its_neighbours_documents(store: Store) -> None:
    store.put_fact(turn("a", "first words", 0))
    store.put_fact(turn("c", "third words", 2))
    store.put_fact(turn("b", "the marathon in Berlin", 1))  # written after its next turn
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("marathon", flt)} == {"a", "b", "c"}


def test_reindex_turns_rebuilds_documents_and_is_idempotent(store: Store) -> None:
    store.put_fact(turn("a", "we booked the ferry", 0))
    store.put_fact(turn("b", "for Tuesday", 1))
    assert store.reindex_turns() == 0  # already current
    done: list[tuple[int, int]] = []
    assert store.reindex_turns(lambda n, total: done.append((n, total))) == 0
    assert done[-1] == (2, 2)
    flt = SearchFilter(kinds=("fact",))
    assert {h.ref for h in store.keyword_search("ferry", flt)} == {"a", "b"}


def test_superseded_messages_leave_the_index(store: Store) -> None:
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("alpha question")])
    store.sync_messages(session.id, [user("beta question")])
    hits = store.keyword_search("question", SearchFilter())
    assert [h.text for h in hits] == ["beta question"]


# --- vectors --------------------------------------------------------------------------


def test_vector_knn_with_scope_filter(store: Store) -> None:
    for i in range(30):
        store.put_fact(fact(f"f{i}", f"fact number {i}", scope="a" if i % 2 else "b"))
    store.put_vectors("fact", [(f"f{i}", unit(i)) for i in range(30)], model=MODEL)
    query = (unit(7) + 0.1 * unit(100)).astype(np.float32)
    hits = store.vector_search(query, SearchFilter(), model=MODEL, limit=3)
    assert hits[0].ref == "f7"
    assert hits[0].score == pytest.approx(float(unit(7) @ query / np.linalg.norm(query)), abs=1e-4)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)
    scoped = store.vector_search(unit(7), SearchFilter(scopes=("b",)), model=MODEL, limit=5)
    assert len(scoped) == 5
    assert all(h.scope == "b" and int(h.ref[1:]) % 2 == 0 for h in scoped)
    assert "f7" not in {h.ref for h in scoped}
    assert store.vector_search(unit(7), SearchFilter(), model="other-model") == []
    assert store.vector_search(unit(7), SearchFilter(scopes=("zzz",)), model=MODEL) == []


def test_vector_search_sees_new_and_replaced_vectors(store: Store) -> None:
    session = store.ensure_session("s", namespace="ns")
    stored = store.append_messages(session.id, [user("one"), user("two")])
    refs = [str(m.id) for m in stored]
    store.put_vectors("message", [(refs[0], unit(1))], model=MODEL)
    assert [h.ref for h in store.vector_search(unit(1), SearchFilter(), model=MODEL)] == [refs[0]]
    store.put_vectors("message", [(refs[1], unit(2))], model=MODEL)
    hits = store.vector_search(unit(2), SearchFilter(session_id=session.id), model=MODEL)
    assert [h.ref for h in hits] == [refs[1], refs[0]]
    store.put_vectors("message", [(refs[0], unit(2))], model=MODEL)
    hits = store.vector_search(unit(2), SearchFilter(), model=MODEL)
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0], abs=1e-5)
    assert hits[0].kind == "message"
    assert hits[0].scope == "ns"


def test_missing_get_and_drop_vectors(store: Store) -> None:
    session = store.ensure_session("s")
    stored = store.append_messages(session.id, [user("alpha"), user("beta"), user("gamma")])
    refs = [str(m.id) for m in stored]
    assert store.missing_vectors("message", model=MODEL) == [
        (refs[0], "alpha"),
        (refs[1], "beta"),
        (refs[2], "gamma"),
    ]
    store.put_vectors("message", [(refs[0], unit(1)), (refs[1], unit(2))], model=MODEL)
    store.put_vectors("message", [(refs[2], unit(3, dim=8))], model="old-model")
    assert store.missing_vectors("message", model=MODEL) == [(refs[2], "gamma")]
    assert store.missing_vectors("message", model=MODEL, limit=0) == []
    got = store.get_vectors("message", [refs[0], refs[2], "999999"], model=MODEL)
    assert set(got) == {refs[0]}
    np.testing.assert_allclose(got[refs[0]], unit(1), rtol=1e-6)
    assert store.vector_search(unit(3, dim=8), SearchFilter(), model="old-model")
    assert store.drop_vectors(except_model=MODEL) == 1
    assert store.get_vectors("message", [refs[2]], model="old-model") == {}
    assert store.vector_search(unit(3, dim=8), SearchFilter(), model="old-model") == []
    assert store.drop_vectors(except_model=MODEL) == 0
    assert len(store.vector_search(unit(1), SearchFilter(), model=MODEL)) == 2


def test_changed_fact_text_needs_a_new_vector(store: Store) -> None:
    store.put_fact(fact("f", "first text"))
    store.put_vectors("fact", [("f", unit(1))], model=MODEL)
    store.put_fact(fact("f", "first text"))
    assert store.missing_vectors("fact", model=MODEL) == []
    store.put_fact(fact("f", "second text"))
    assert store.missing_vectors("fact", model=MODEL) == [("f", "second text")]
    assert store.vector_search(unit(1), SearchFilter(), model=MODEL) == []


# --- fork and delete --------------------------------------------------------------------


def test_fork_copies_a_prefix_and_state(store: Store) -> None:
    source = store.ensure_session("src", namespace="repo")
    stored = store.append_messages(
        source.id, [user("q1"), assistant("a1"), user("q2"), assistant("a2")]
    )
    store.put_vectors("message", [(str(stored[0].id), unit(1))], model=MODEL)
    store.set_state(source.id, "todo", "- [ ] x")
    store.update_session(source.id, summary="q1 and a1", summarized_count=2)

    fork = store.fork_session(source.id, new_key="fork", at_position=2)
    assert (fork.key, fork.namespace, fork.parent_id, fork.fork_position) == (
        "fork",
        "repo",
        source.id,
        2,
    )
    assert (fork.summary, fork.summarized_count, fork.message_count) == ("q1 and a1", 2, 2)
    assert texts(store, fork.id) == ["q1", "a1"]
    assert store.get_state(fork.id) == {"todo": "- [ ] x"}
    store.append_messages(fork.id, [user("q2 in the fork")])
    assert texts(store, fork.id) == ["q1", "a1", "q2 in the fork"]
    assert texts(store, source.id) == ["q1", "a1", "q2", "a2"]
    hits = store.keyword_search("fork", SearchFilter(session_id=fork.id))
    assert [h.text for h in hits] == ["q2 in the fork"]
    forked_first = str(store.list_messages(fork.id)[0].id)
    assert set(store.get_vectors("message", [forked_first], model=MODEL)) == {forked_first}

    early = store.fork_session(source.id, new_key="early", at_position=1)
    assert (early.summary, early.summarized_count) == ("", 0)
    whole = store.fork_session(source.id, new_key="whole")
    assert texts(store, whole.id) == ["q1", "a1", "q2", "a2"]
    with pytest.raises(StoreError):
        store.fork_session(source.id, new_key="fork")
    with pytest.raises(SessionNotFound):
        store.fork_session("missing", new_key="x")


def test_delete_removes_everything_of_a_session(store: Store) -> None:
    doomed = store.ensure_session("doomed", namespace="ns")
    kept = store.ensure_session("kept", namespace="ns")
    for session in (doomed, kept):
        stored = store.append_messages(session.id, [user(f"zebra talk in {session.key}")])
        store.put_vectors("message", [(str(stored[0].id), unit(1))], model=MODEL)
        store.add_event(session.id, "dropped", {}, text=f"zebra event {session.key}")
        store.set_state(session.id, "todo", "x")
        store.put_fact(fact(f"fact-{session.key}", "zebra fact", conversation_id=session.id))
    assert store.delete_session(doomed.id)
    assert store.get_session(doomed.id) is None
    assert store.find_session("doomed") is None
    assert store.list_messages(doomed.id, include_superseded=True) == []
    assert store.list_events(doomed.id) == []
    assert store.get_state(doomed.id) == {}
    assert store.list_facts(conversation_id=doomed.id, include_deleted=True) == []
    hits = store.keyword_search("zebra", SearchFilter(), limit=20)
    assert hits
    assert {h.session_id for h in hits} == {kept.id}
    vector_hits = store.vector_search(unit(1), SearchFilter(), model=MODEL)
    assert {h.session_id for h in vector_hits} == {kept.id}
    assert store.count("vectors") == 1
    assert not store.delete_session(doomed.id)
    assert texts(store, kept.id) == ["zebra talk in kept"]


# --- meta, dump and load ------------------------------------------------------------------


def test_meta_set_and_get(store: Store) -> None:
    assert store.get_meta("embedding_model") is None
    store.set_meta("embedding_model", "a")
    store.set_meta("embedding_model", "b")
    assert store.get_meta("embedding_model") == "b"


def test_dump_and_load_round_trip(store_factory: StoreFactory) -> None:
    source = store_factory()
    session = source.ensure_session("s", namespace="ns")
    source.update_session(session.id, title="T", metadata={"tags": ["a"]}, summary="sum")
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
    source.put_vectors("fact", [("f1", unit(1))], model=MODEL)
    msg_ref = str(source.list_messages(session.id)[0].id)
    source.put_vectors("message", [(msg_ref, unit(2))], model=MODEL)
    source.set_meta("embedding_model", MODEL)
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
    assert target.get_meta("embedding_model") == MODEL
    flt = SearchFilter()
    assert target.keyword_search("walrus", flt) == source.keyword_search("walrus", flt)
    assert target.keyword_search("second", flt) == []
    assert target.vector_search(unit(2), flt, model=MODEL) == source.vector_search(
        unit(2), flt, model=MODEL
    )
    appended = target.append_messages(session.id, [user("after the copy")])
    assert appended[0].id > max(
        m.id for m in source.list_messages(session.id, include_superseded=True)
    )


def test_unknown_table_is_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        store.count("docs; DROP TABLE sessions")
    with pytest.raises(StoreError):
        list(store.dump("nope"))


def test_backend_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert store.url
