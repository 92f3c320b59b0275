"""A turn's messages are stored while the request is on its way upstream, never in front of it.

What a turn forwards depends only on what earlier turns stored, so its own messages are
queued to the store's writer (`engine.writes`) and stored beside the upstream call. On
SQLite with one worker, a client that resends its history may have the answer first: the
session's next turn waits for the turn's writes before it reads (`Writes.settled`). A
store that fails to keep the turn fails open: the client gets its answer, the failure is
recorded, and the client's next request (which resends its history) stores what was
missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from memlane.engine import turn_store
from memlane.engine.failopen import EVENT
from memlane.engine.turn import Turn
from memlane.store import StoreError
from tests.proxy.conftest import QUIET, ask
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
)

KEY = "on-the-way"
STORE_SECONDS = 0.3
"""How long storing the turn takes here: long enough that an answer relayed without
waiting for it would reach the client first."""


def held(
    reached: threading.Event, write: Callable[..., Any], what: str, *, pause: float = 0.0
) -> Callable[..., Any]:
    """`write`, run only once the upstream has the request (`reached`), `pause` s later."""

    def once_upstream_has_it(*args: Any) -> Any:
        assert reached.wait(10), f"{what} in front of its request"
        time.sleep(pause)
        return write(*args)

    return once_upstream_has_it


def client_messages(proxy: RunningProxy) -> list[tuple[str, str]]:
    """What the store holds of the client's messages now (not waiting for anything)."""
    store = proxy.runtime.store
    session = store.find_session(KEY)
    if session is None:
        return []
    return [
        (m.message.role, m.message.text)
        for m in store.list_messages(session.id)
        if m.message.origin == "client"
    ]


def slow_store(monkeypatch: pytest.MonkeyPatch, upstream: ScriptedUpstream, text: str) -> None:
    """Turns take `STORE_SECONDS` to store, from the moment the upstream has them; it
    answers `text` at once."""
    reached = threading.Event()
    store = held(reached, turn_store.store_incoming, "the turn was stored", pause=STORE_SECONDS)

    def answer(request: RecordedRequest) -> Reply:
        reached.set()
        return Reply(text=text)

    monkeypatch.setattr(turn_store, "store_incoming", store)
    upstream.respond_with(answer)


@pytest.mark.parametrize("stream", [False, True])
def test_the_answer_does_not_wait_for_the_turn_to_be_stored_and_the_next_turn_does(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    """SQLite, one worker (`Runtime.serves_alone`): the first turn's store is held until the
    client has its answer; an answer that waited for it would hold it past its 10 s."""
    proxy = proxy_factory(request_wait_seconds=30, **QUIET)
    store, released = turn_store.store_incoming, threading.Event()
    held_until: list[bool] = []

    def store_once_released(rt: Any, turn: Turn) -> None:
        if not held_until:
            held_until.append(released.wait(10))
        store(rt, turn)

    monkeypatch.setattr(turn_store, "store_incoming", store_once_released)
    upstream.respond_with(lambda request: Reply(text="stored on the way"))
    scaffolded = {"user-agent": "codex_cli_rs/0.169.0"}
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]

    first = ask(proxy, KEY, history, stream=stream, **scaffolded, **{"x-memlane-todo": "kept"})

    assert first.rstrip().endswith("[DONE]") if stream else first == "stored on the way"
    assert client_messages(proxy) == []  # the client resends it: its answer did not wait
    history += [
        {"role": "assistant", "content": "stored on the way"},
        {"role": "user", "content": "and then?"},
    ]
    second = threading.Thread(
        target=ask, args=(proxy, KEY, history), kwargs={"stream": stream, **scaffolded}
    )
    second.start()  # the next turn, sent at once: it waits for the first's writes
    time.sleep(0.2)
    released.set()
    second.join(30)
    assert not second.is_alive()
    assert held_until == [True]

    # shaped from what the first turn kept (its todo), once that was stored
    before, after = (request.json["messages"] for request in upstream.model_requests)
    assert after[: len(before)] == before
    assert any("<todo>\nkept\n</todo>" in message["content"] for message in before)
    proxy.settled()
    assert [text for role, text in client_messages(proxy) if role != "assistant"] == [
        "be brief",
        "hello",
        "and then?",
    ]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["sqlite with two workers", "postgresql"])
def test_the_answer_waits_for_the_turn_where_another_process_may_take_the_next(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    stream: bool,
    where: str,
) -> None:
    """Another process reads the session from the store alone (`Runtime.serves_alone`):
    what the client sent is stored before it has the whole answer (the answer follows; a
    process that takes the next turn first stores it from the client's resend)."""
    if where == "postgresql":
        proxy = proxy_factory(store_url=request.getfixturevalue("pg_url"), **QUIET)
    else:
        proxy = proxy_factory(workers=2, **QUIET)
    assert not proxy.runtime.serves_alone
    slow_store(monkeypatch, upstream, "stored first")

    ask(proxy, KEY, [{"role": "user", "content": "hello"}], stream=stream)

    assert client_messages(proxy)[:1] == [("user", "hello")]
    proxy.settled()
    assert client_messages(proxy) == [("user", "hello"), ("assistant", "stored first")]


def test_a_new_sessions_row_is_written_while_its_first_request_is_upstream(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in front of it (`engine.sessions.ahead`): first among the turn's writes, in the
    store's writer, with the id the request was shaped with."""
    reached = threading.Event()
    rows_upstream_saw: list[object] = []

    def answer(request: RecordedRequest) -> Reply:
        rows_upstream_saw.append(mproxy.runtime.store.find_session(KEY))
        reached.set()
        return Reply(text="a new session")

    monkeypatch.setattr(
        turn_store, "write_made", held(reached, turn_store.write_made, "the row was written")
    )
    upstream.respond_with(answer)

    ask(mproxy, KEY, [{"role": "user", "content": "hello"}], stream=True)

    assert rows_upstream_saw == [None]
    mproxy.settled()
    assert client_messages(mproxy) == [("user", "hello"), ("assistant", "a new session")]


def test_a_turn_the_store_cannot_keep_still_gets_its_answer_and_the_next_turn_stores_it(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = turn_store.store_incoming
    failures = iter([StoreError("database or disk is full")])

    def store_or_fail(rt: Any, turn: Turn) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        store(rt, turn)

    monkeypatch.setattr(turn_store, "store_incoming", store_or_fail)
    upstream.script(Reply(text="first answer"), Reply(text="second answer"))
    history = [{"role": "user", "content": "first question"}]

    first = ask(mproxy, KEY, history, stream=False)

    assert first == "first answer"
    session = mproxy.store.find_session(KEY)
    assert session is not None
    assert mproxy.store.list_messages(session.id) == []  # nor the answer to nothing stored
    (event,) = mproxy.store.list_events(session.id, kind=EVENT)
    assert event.payload["stage"] == "store"
    assert "disk is full" in event.payload["error"]

    history += [
        {"role": "assistant", "content": first},
        {"role": "user", "content": "second question"},
    ]
    second = ask(mproxy, KEY, history, stream=False)
    mproxy.settled()
    history.append({"role": "assistant", "content": second})
    assert client_messages(mproxy) == [(item["role"], item["content"]) for item in history]


def test_a_turn_whose_messages_cannot_be_stored_leaves_its_session_as_it_was(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its title, model and client are written in the same commit as its messages."""
    store = mproxy.runtime.store

    def full(*args: Any) -> Any:
        raise StoreError("database or disk is full")

    monkeypatch.setattr(store, "sync_messages", full)
    upstream.script(Reply(text="an answer"))

    assert ask(mproxy, KEY, [{"role": "user", "content": "name me"}], stream=False) == "an answer"

    session = mproxy.store.find_session(KEY)
    assert session is not None  # written first, on its own
    assert (session.title, session.metadata) == (None, {})


def test_a_store_that_cannot_be_read_still_lets_the_request_through(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database gone away (PostgreSQL restarting) failed the request with a 503 while
    reading the session it belongs to: memory never breaks a request."""
    store = mproxy.runtime.store

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the PostgreSQL store is unreachable")

    monkeypatch.setattr(store, "find_session_state", gone)
    upstream.script(Reply(text="answered all the same"))

    said = ask(mproxy, KEY, [{"role": "user", "content": "are you there?"}], stream=False)

    assert said == "answered all the same"
    sent = upstream.model_requests[-1].json["messages"]
    assert sent[-1] == {"role": "user", "content": "are you there?"}
    failed = mproxy.runtime.activity.snapshot()["failures"]["store"]  # logged and counted
    assert "unreachable" in failed["last"]
