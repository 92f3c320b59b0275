"""The message log: a session's messages in order, resent histories stored once, events.

Run once per backend (`tests/store/conftest.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.store import (
    CountWhenStored,
    MessageLog,
    NewEvent,
    NewMessage,
    SearchFilter,
    SessionNotFound,
    Store,
    StoreError,
    Usage,
)
from memlane.types import Message, ToolCall
from tests.store.contract.support import assistant, stored_rows_read, texts, user


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
    assert [m.position for m in store.list_messages(session.id, roles=("user", "tool"))] == [0, 2]
    assert [m.position for m in store.list_messages(session.id, roles=())] == []
    between = store.list_messages(session.id, since_position=1, before_position=3)
    assert [m.position for m in between] == [1, 2]
    assert [
        m.message.text for m in store.list_messages(session.id, since_position=1, roles=("user",))
    ] == []
    assert texts(store, session.id, transcript_only=True) == ["first", "done"]
    got = store.get_session(session.id)
    assert got is not None
    assert got.message_count == 4


def test_message_texts_are_the_messages_words_without_their_content(store: Store) -> None:
    """`list_message_texts` lists what `list_messages` lists, with the same filters, as
    positions, roles, kinds, origins and texts (what session indexing reads)."""
    session = store.ensure_session("s")
    call = Message(
        role="assistant", kind="tool_call", tool_calls=(ToolCall("c1", "ls", "{}"),), wire="chat"
    )
    result = Message(role="tool", kind="tool_result", text="a.py", call_id="c1", name="ls")
    injected = Message(role="user", text="[memory] noted", origin="memlane")
    stored = store.append_messages(
        session.id,
        [user("first"), NewMessage(call), NewMessage(result), NewMessage(injected), assistant("x")],
    )
    store.set_message_status(stored[4].id, "superseded")
    queries: list[dict[str, object]] = [
        {},
        {"include_superseded": True},
        {"since_position": 1},
        {"since_position": 1, "before_position": 3},
        {"roles": ("user",)},
        {"roles": ()},
    ]
    for query in queries:
        full = store.list_messages(session.id, **query)  # type: ignore[arg-type]
        words = store.list_message_texts(session.id, **query)  # type: ignore[arg-type]
        assert [(w.position, w.role, w.kind, w.origin, w.text) for w in words] == [
            (m.position, m.message.role, m.message.kind, m.message.origin, m.message.text)
            for m in full
        ], query
    assert [w.position for w in store.list_message_texts(session.id)] == [0, 1, 2, 3]


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


def test_sync_says_where_the_answer_to_the_stored_messages_goes(store: Store) -> None:
    session = store.ensure_session("s")
    assert store.sync_messages(session.id, [user("hi")]).next_position == 1
    store.append_messages(session.id, [assistant("hello!")])
    resent = store.sync_messages(session.id, [user("hi"), assistant("hello!")])
    assert (resent.added, resent.next_position) == ((), 2)


def test_an_answer_stored_late_is_not_stored_twice(store: Store) -> None:
    """The client's next request, served elsewhere, stored the answer first (it resent it)."""
    session = store.ensure_session("s")
    asked = store.sync_messages(session.id, [user("hi")])
    store.sync_messages(session.id, [user("hi"), assistant("hello!"), user("how?")])
    late = store.append_messages(session.id, [assistant("hello!")], unless_from=asked.next_position)
    assert late == []
    assert texts(store, session.id) == ["hi", "hello!", "how?"]


def test_an_answer_stored_late_is_stored_when_nobody_stored_it(store: Store) -> None:
    session = store.ensure_session("s")
    asked = store.sync_messages(session.id, [user("hi")])
    store.append_messages(session.id, [assistant("other")])  # a different answer is stored
    late = store.append_messages(session.id, [assistant("hello!")], unless_from=asked.next_position)
    assert [m.position for m in late] == [2]
    assert texts(store, session.id) == ["hi", "other", "hello!"]


def test_an_answers_usage_is_counted_with_its_messages(store: Store) -> None:
    session = store.ensure_session("s")
    store.add_usage(session.id, prompt_tokens=1, completion_tokens=1, cost_usd=0.25)
    store.sync_messages(session.id, [user("hi")])
    usage = Usage(prompt_tokens=100, completion_tokens=20, cost_usd=0.5)
    store.append_messages(session.id, [assistant("hello!")], usage=usage)
    got = store.get_session(session.id)
    assert got is not None
    assert (got.prompt_tokens, got.completion_tokens, got.message_count) == (101, 21, 2)
    assert got.cost_usd == pytest.approx(0.75)
    assert got.updated_at > session.updated_at  # the append marks it active, as ever


def test_an_answer_stored_late_still_counts_its_usage_once(store: Store) -> None:
    """Its messages were stored by the client's next request; what it cost was not."""
    session = store.ensure_session("s")
    asked = store.sync_messages(session.id, [user("hi")])
    store.sync_messages(session.id, [user("hi"), assistant("hello!"), user("how?")])
    usage = Usage(prompt_tokens=9, completion_tokens=4, cost_usd=0.125)
    late = store.append_messages(
        session.id, [assistant("hello!")], unless_from=asked.next_position, usage=usage
    )
    got = store.get_session(session.id)
    assert late == []
    assert got is not None
    assert (got.prompt_tokens, got.completion_tokens, got.message_count) == (9, 4, 3)
    assert got.cost_usd == pytest.approx(0.125)
    with pytest.raises(SessionNotFound):
        store.append_messages("missing", [], usage=usage)


def test_a_resent_history_counts_only_the_messages_it_stores(store: Store) -> None:
    session = store.ensure_session("s")
    counted: list[str] = []

    def count(message: Message) -> int:
        counted.append(message.text)
        return len(message.text)

    history = [Message("user", "hello"), Message("assistant", "hi"), Message("user", "again")]
    store.sync_messages(session.id, CountWhenStored(history[:2], count))
    result = store.sync_messages(session.id, CountWhenStored(history, count))
    assert counted == ["hello", "hi", "again"]  # each once: the resent two are not counted
    assert [(m.message.text, m.token_count) for m in result.added] == [("again", 5)]
    stored = store.list_messages(session.id)
    assert [(m.message.text, m.token_count) for m in stored] == [
        ("hello", 5),
        ("hi", 2),
        ("again", 5),
    ]
    late = store.append_messages(session.id, CountWhenStored([Message("assistant", "ok")], count))
    assert [(m.position, m.token_count) for m in late] == [(3, 2)]
    assert counted[3:] == ["ok"]


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


def test_the_edit_point_says_what_sync_would_supersede_and_changes_nothing(store: Store) -> None:
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
    edited = [user("q1"), assistant("a1"), user("q2 edited")]
    ahead = [user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]

    assert store.edit_point(session.id, [m.message for m in edited]) == 2
    assert store.edit_point(session.id, [m.message for m in ahead]) is None  # appends only
    assert store.edit_point(session.id, [m.message for m in ahead[:2]]) is None  # a retry
    assert texts(store, session.id) == ["q1", "a1", "q2", "a2"]
    assert store.sync_messages(session.id, edited).matched == 2


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
    with pytest.raises(StoreError, match="one of ok, failed, superseded"):
        store.set_message_status(stored[0].id, "bogus")


def test_a_retry_after_a_failed_answer_stores_its_question_again(store: Store) -> None:
    """An upstream failure marks the turn's question failed; the client sends the same
    history again, and the question is stored again, as it is in the store's history."""
    session = store.ensure_session("s")
    history = [user("q1"), assistant("a1"), user("q2")]
    asked = store.sync_messages(session.id, history).added
    store.set_message_status(asked[-1].id, "failed")
    retry = store.sync_messages(session.id, history)
    assert (retry.matched, [m.message.text for m in retry.added]) == (2, ["q2"])
    assert [(m.message.text, m.status) for m in store.list_messages(session.id)] == [
        ("q1", "ok"),
        ("a1", "ok"),
        ("q2", "failed"),
        ("q2", "ok"),
    ]
    nxt = store.sync_messages(session.id, [*history, assistant("a2"), user("q3")])
    assert (nxt.matched, [m.message.text for m in nxt.added]) == (3, ["a2", "q3"])


def test_the_usual_turn_reads_only_what_was_stored_since_the_last(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session keeps a digest of its stored client history: a resent history that
    starts with it is matched by hashing that start and reading what was stored after
    (the answer); an edit reads the whole stored history."""
    session = store.ensure_session("s")
    history = [user("q1")]
    store.sync_messages(session.id, history)
    read = stored_rows_read(monkeypatch)
    for turn in range(2, 5):
        answer = [assistant(f"a{turn - 1}")]
        state = NewMessage(Message(role="system", text="todo", origin="state"))
        store.append_messages(session.id, [state, *answer])  # the answer, after a block
        history += [*answer, user(f"q{turn}")]
        synced = store.sync_messages(session.id, history)
        assert (synced.matched, [m.message.text for m in synced.added]) == (
            len(history) - 1,
            [f"q{turn}"],
        )
    assert store.sync_messages(session.id, history).added == ()  # a retry
    assert read == [1, 1, 1, 0]
    edited = [*history[:-1], user("q4 edited")]
    assert store.sync_messages(session.id, edited).superseded == 1
    assert read[-1] == len(history)  # the digest stands for none of it: all is read
    store.append_messages(session.id, [assistant("a4")])
    assert store.sync_messages(session.id, [*edited, assistant("a4")]).added == ()
    assert read[-1] == 1
    assert texts(store, session.id)[-4:] == ["todo", "a3", "q4 edited", "a4"]


def test_a_history_without_a_digest_is_read_once_then_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork (like a session stored before digests were kept) has none: its first sync
    reads the stored history and keeps its digest, the next reads nothing stored."""
    source = store.ensure_session("s")
    history = [user("q1"), assistant("a1"), user("q2"), assistant("a2")]
    store.sync_messages(source.id, history)
    fork = store.fork_session(source.id, new_key="fork")
    read = stored_rows_read(monkeypatch)
    assert store.sync_messages(fork.id, history).added == ()
    assert store.sync_messages(fork.id, [*history, user("q3")]).matched == 4
    assert read == [4, 0]
    assert texts(store, fork.id) == ["q1", "a1", "q2", "a2", "q3"]


def test_client_messages_appended_outside_a_sync_are_matched_afterwards(store: Store) -> None:
    """A client message appended (a continued turn, an import) is part of the history the
    next resend is matched against."""
    session = store.ensure_session("s")
    store.sync_messages(session.id, [user("q1")])
    store.append_messages(session.id, [assistant("a1"), user("q2")])
    synced = store.sync_messages(session.id, [user("q1"), assistant("a1"), user("q2 edited")])
    assert (synced.matched, synced.superseded) == (2, 1)
    assert texts(store, session.id) == ["q1", "a1", "q2 edited"]


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


def test_an_event_is_dated_when_what_it_records_happened(store: Store) -> None:
    session = store.ensure_session("k")
    said = datetime(2026, 3, 9, 14, 2, tzinfo=UTC)
    event = store.add_event(session.id, "dropped", {"n": 1}, text="we chose PostgreSQL", at=said)
    assert event.created_at == said
    assert [e.created_at for e in store.list_events(session.id)] == [said]
    (hit,) = store.keyword_search("PostgreSQL", SearchFilter(kinds=("event",)))
    assert hit.created_at == said  # what a recalled snippet shows
    touched = store.get_session(session.id)
    assert touched is not None
    assert touched.updated_at > said  # the session's activity is now, not then


def test_an_event_of_a_write_that_marked_its_session_leaves_the_mark(store: Store) -> None:
    """A turn's record after its answer's messages: the append marked the session active,
    so the event does not stamp it again (`active=False`); a document still finds the
    session's namespace."""
    session = store.ensure_session("s", namespace="work")
    with store.transaction():
        store.append_messages(session.id, [assistant("done")])
        marked = store.get_session(session.id)
        store.add_event(session.id, "turn", {"n": 1}, active=False)
        store.add_event(session.id, "dropped", {}, text="the heron deploy", active=False)
    after = store.get_session(session.id)
    assert marked is not None
    assert after is not None
    assert marked.updated_at > session.updated_at
    assert after.updated_at == marked.updated_at
    assert [e.kind for e in store.list_events(session.id)] == ["turn", "dropped"]
    (hit,) = store.keyword_search("heron", SearchFilter(kinds=("event",)))
    assert (hit.scope, hit.session_id) == ("work", session.id)
    store.add_event(session.id, "turn", {"n": 2})  # by default, an event marks it
    touched = store.get_session(session.id)
    assert touched is not None
    assert touched.updated_at > after.updated_at


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


def test_an_event_is_indexed_as_its_document_and_shown_as_its_text(store: Store) -> None:
    session = store.ensure_session("s")
    event = store.add_event(
        session.id,
        "dropped",
        {},
        text="user: yes, on Tuesday",
        document="user: yes, on Tuesday\nuser: yes, on Tuesday\ndid the flamingo build pass?",
    )
    hits = store.keyword_search("flamingo", SearchFilter(kinds=("event",)))
    assert [(h.ref, h.text) for h in hits] == [(str(event.id), "user: yes, on Tuesday")]
    assert store.list_events(session.id)[0].text == "user: yes, on Tuesday"


def test_backend_plays_the_message_log_role(store: Store) -> None:
    assert isinstance(store, MessageLog)
