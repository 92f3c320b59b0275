"""Sessions: created by key, counted, forked, deleted with all of theirs; their scaffold state.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

import pytest

from memlane.store import (
    SearchFilter,
    SessionNotFound,
    SessionStore,
    Store,
    StoreError,
)
from tests.store.contract.support import MODEL, assistant, fact, texts, unit, user


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


def test_a_new_row_takes_the_id_it_was_made_with_and_an_existing_row_keeps_its_own(
    store: Store,
) -> None:
    """A session made ahead of its row (`engine.sessions.ahead`) names its id; a row
    another writer made first keeps the one it has."""
    made = store.ensure_session("ahead", namespace="repo", session_id="0123456789abcdef" * 2)
    assert made.id == "0123456789abcdef" * 2
    assert store.find_session("ahead") == made
    again = store.ensure_session("ahead", session_id="f" * 32)
    assert again.id == made.id
    assert store.get_session("f" * 32) is None


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


def test_usage_counts_without_marking_the_session_active(store: Store) -> None:
    # the write the usage comes with marks the activity; a stamp of its own would
    # rewrite `updated_at`'s three index entries once more per answer
    session = store.ensure_session("s")
    store.add_usage(session.id, prompt_tokens=7, completion_tokens=3, cost_usd=0.5)
    got = store.get_session(session.id)
    assert got is not None
    assert (got.prompt_tokens, got.completion_tokens) == (7, 3)
    assert got.updated_at == session.updated_at
    with pytest.raises(SessionNotFound):
        store.add_usage("no-such-session", prompt_tokens=1)


def test_a_retitle_corrects_the_title_without_marking_the_session_active(store: Store) -> None:
    first = store.ensure_session("first")
    store.update_session(first.id, title="my key is sk-secret")
    second = store.ensure_session("second")
    order = [s.id for s in store.list_sessions()]
    assert order == [second.id, first.id]
    stamp = store.get_session(first.id).updated_at  # type: ignore[union-attr]
    store.retitle(first.id, "my key is [redacted]")
    again = store.get_session(first.id)
    assert again is not None
    assert (again.title, again.updated_at) == ("my key is [redacted]", stamp)
    assert [s.id for s in store.list_sessions()] == order


def test_a_session_is_found_with_its_state_in_one_read(store: Store) -> None:
    session = store.ensure_session("s", tenant="t1")
    store.set_state(session.id, "todo", "- [ ] a")
    store.set_state(session.id, "plan", "{}")
    store.ensure_session("s", tenant="t2")  # the same key in another tenant
    found = store.find_session_state("s", tenant="t1")
    assert found == (store.find_session("s", tenant="t1"), {"plan": "{}", "todo": "- [ ] a"})
    assert found is not None
    assert found[0].id == session.id
    other = store.find_session_state("s", tenant="t2")
    assert other is not None
    assert other[1] == {}
    assert store.find_session_state("s") is None  # no tenant is a tenant of its own
    assert store.find_session_state("nope", tenant="t1") is None


def test_a_session_and_its_state_are_read_in_one_statement(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request's shape reads them first: on PostgreSQL each statement is a round
    trip to the server in front of the forward."""
    from memlane.store.postgres.db import PostgresDb
    from memlane.store.sqlite.db import SQLiteDb

    session = store.ensure_session("s")
    store.set_state(session.id, "todo", "- [ ] a")
    store.set_state(session.id, "pinned", "keep")
    statements: list[str] = []
    for db in (SQLiteDb, PostgresDb):
        for name in ("one", "all"):
            real = getattr(db, name)

            def counted(self: object, sql: str, *params: object, _real: object = real) -> object:
                statements.append(sql)
                return _real(self, sql, *params)  # type: ignore[operator]

            monkeypatch.setattr(db, name, counted)
    found = store.find_session_state("s")
    assert found is not None
    assert found[1] == {"pinned": "keep", "todo": "- [ ] a"}
    assert len(statements) == 1


def test_state_set_replace_and_remove(store: Store) -> None:
    session = store.ensure_session("s")
    store.set_state(session.id, "todo", "- [ ] a")
    store.set_state(session.id, "pinned", "keep")
    store.set_state(session.id, "todo", "- [x] a")
    assert store.get_state(session.id) == {"todo": "- [x] a", "pinned": "keep"}
    store.set_state(session.id, "pinned", None)
    assert store.get_state(session.id) == {"todo": "- [x] a"}
    assert store.get_state("missing") == {}


def test_fork_copies_a_prefix_and_state(store: Store) -> None:
    source = store.ensure_session("src", namespace="repo")
    store.append_messages(source.id, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
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
        store.append_messages(session.id, [user(f"talk in {session.key}")])
        event = store.add_event(session.id, "dropped", {}, text=f"zebra event {session.key}")
        store.put_fact(fact(f"fact-{session.key}", "zebra fact", conversation_id=session.id))
        store.put_vectors("event", [(str(event.id), unit(1))], model=MODEL)
        store.put_vectors("fact", [(f"fact-{session.key}", unit(1))], model=MODEL)
        store.set_state(session.id, "todo", "x")
    assert store.delete_session(doomed.id)
    assert store.get_session(doomed.id) is None
    assert store.find_session("doomed") is None
    assert store.list_messages(doomed.id, include_superseded=True) == []
    assert store.list_events(doomed.id) == []
    assert store.get_state(doomed.id) == {}
    assert store.list_facts(conversation_id=doomed.id, include_deleted=True) == []
    hits = store.keyword_search("zebra", SearchFilter(), limit=20)
    assert sorted((h.kind, h.session_id) for h in hits) == [("event", kept.id), ("fact", kept.id)]
    vector_hits = store.vector_search(unit(1), SearchFilter(), model=MODEL)
    assert sorted((h.kind, h.session_id) for h in vector_hits) == [
        ("event", kept.id),
        ("fact", kept.id),
    ]
    assert store.count("vectors") == 2
    assert not store.delete_session(doomed.id)
    assert texts(store, kept.id) == ["talk in kept"]


def test_deleting_a_session_unlinks_its_forks_and_children(store: Store) -> None:
    """A fork outlives the session it was forked from, with its own copy of the history;
    its link must not name a session that is gone (`@@name~1` would look for it)."""
    source = store.ensure_session("source", namespace="ns")
    store.append_messages(source.id, [user("q1"), assistant("a1")])
    fork = store.fork_session(source.id, new_key="fork", at_position=1)
    child = store.fork_session(source.id, new_key="child", at_position=0)
    grandchild = store.fork_session(fork.id, new_key="grandchild")
    other = store.ensure_session("other", namespace="ns")
    other_fork = store.fork_session(other.id, new_key="other-fork")

    assert store.delete_session(source.id)
    for orphan in (fork, child):
        kept = store.get_session(orphan.id)
        assert kept is not None
        assert (kept.parent_id, kept.fork_position) == (None, None)
    assert texts(store, fork.id) == ["q1"]
    still = store.get_session(grandchild.id)
    assert still is not None
    assert still.parent_id == fork.id  # only the deleted session's links go
    linked = store.get_session(other_fork.id)
    assert linked is not None
    assert linked.parent_id == other.id


def test_backend_plays_the_session_store_role(store: Store) -> None:
    assert isinstance(store, SessionStore)


def test_a_key_is_unique_within_its_tenant(store: Store) -> None:
    mine = store.ensure_session("demo", tenant="a" * 32)
    theirs = store.ensure_session("demo", tenant="b" * 32)
    plain = store.ensure_session("demo")
    assert len({mine.id, theirs.id, plain.id}) == 3
    assert (mine.tenant, theirs.tenant, plain.tenant) == ("a" * 32, "b" * 32, "")
    assert store.ensure_session("demo", tenant="a" * 32).id == mine.id
    assert store.find_session("demo", tenant="b" * 32) == theirs
    assert store.find_session("demo") == plain
    assert store.find_session("demo", tenant="c" * 32) is None
    assert [s.id for s in store.list_sessions(tenant="a" * 32)] == [mine.id]
    assert [s.id for s in store.list_sessions()] == [plain.id]  # "" unless asked otherwise
    assert {s.id for s in store.list_sessions(tenant=None)} == {mine.id, theirs.id, plain.id}


def test_a_fork_stays_in_its_tenant(store: Store) -> None:
    source = store.ensure_session("s", tenant="a" * 32)
    store.ensure_session("taken")  # the same key in another tenant does not block the fork
    fork = store.fork_session(source.id, new_key="taken")
    assert fork.tenant == "a" * 32
    assert store.find_session("taken", tenant="a" * 32) == fork
    with pytest.raises(StoreError, match="already exists"):
        store.fork_session(source.id, new_key="taken")


def summaries(store: Store, query: str, scope: str) -> list[tuple[str, str, str | None, str]]:
    hits = store.keyword_search(query, SearchFilter(kinds=("session",), scopes=(scope,)))
    return [(h.ref, h.scope, h.session_id, h.text) for h in hits]


def test_a_sessions_index_summary_is_a_document_of_its_namespace(store: Store) -> None:
    session = store.ensure_session("chat", namespace="shop")
    meta = {
        "name": "queue-design",
        "description": "Designing the job queue.",
        "summary": "The queue uses Postgres with SKIP LOCKED.",
        "tags": ["backend"],
        "indexed_at": "2026-03-09T14:02:00+00:00",
    }
    store.update_session(session.id, metadata=meta)
    found = (session.id, "ns:shop", session.id, meta["summary"])
    for words in ("skip locked", "queue design", "job", "backend"):  # summary, name, tags
        assert summaries(store, words, "ns:shop") == [found], words
    (hit,) = store.keyword_search("postgres", SearchFilter(kinds=("session",)))
    assert hit.kind == "session"
    assert hit.created_at.isoformat() == "2026-03-09T14:02:00+00:00"  # when it was written
    assert summaries(store, "postgres", "ns:other") == []
    assert store.keyword_search("postgres", SearchFilter(kinds=("fact",))) == []

    store.update_session(session.id, metadata={**meta, "summary": "The queue moved to Redis."})
    assert summaries(store, "postgres", "ns:shop") == []  # the old words are gone
    assert [h[3] for h in summaries(store, "redis", "ns:shop")] == ["The queue moved to Redis."]
    store.update_session(session.id, title="renamed")  # no metadata given: nothing changes
    assert summaries(store, "redis", "ns:shop")
    store.update_session(session.id, metadata={"name": "queue-design"})  # no summary any more
    assert summaries(store, "queue", "ns:shop") == []

    store.update_session(session.id, metadata=meta)
    tenant = "a" * 32
    theirs = store.ensure_session("chat", namespace="shop", tenant=tenant)
    store.update_session(theirs.id, metadata={**meta, "summary": "Their queue uses Kafka."})
    assert summaries(store, "kafka", "ns:shop") == []  # a tenant's summary stays its own
    assert [h[0] for h in summaries(store, "kafka", f"t:{tenant}:ns:shop")] == [theirs.id]
    assert store.delete_session(session.id)
    assert store.keyword_search("postgres", SearchFilter(kinds=("session",))) == []
    assert [h.ref for h in store.keyword_search("queue", SearchFilter(kinds=("session",)))] == [
        theirs.id
    ]
