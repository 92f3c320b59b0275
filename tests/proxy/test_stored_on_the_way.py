"""A turn's messages are stored while the request is on its way upstream, never in front of it.

What a turn forwards depends only on what earlier turns stored, so storing its own
messages runs beside the upstream call, and a client that resends its history may have
the answer first (a quick upstream): the session's next turn is shaped once they are
stored. A store that fails to keep the turn fails open: the client gets its answer, the
failure is recorded, and the client's next request (which resends its history) stores
what was missed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from memlane.engine import pace, pipeline
from memlane.engine.failopen import EVENT
from memlane.engine.threads import TRAFFIC
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
    store = held(reached, pipeline.store_incoming, "the turn was stored", pause=STORE_SECONDS)

    def answer(request: RecordedRequest) -> Reply:
        reached.set()
        return Reply(text=text)

    monkeypatch.setattr(pipeline, "store_incoming", store)
    upstream.respond_with(answer)


@pytest.mark.parametrize("stream", [False, True])
def test_the_answer_does_not_wait_for_the_turn_to_be_stored_and_the_next_turn_does(
    mproxy: RunningProxy,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    monkeypatch.setattr(pace, "UNHURRIED_MS", 60_000.0)  # this test's pauses count as quick
    slow_store(monkeypatch, upstream, "stored on the way")
    scaffolded = {"user-agent": "codex_cli_rs/0.169.0"}
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]

    first = ask(mproxy, KEY, history, stream=stream, **scaffolded, **{"x-memlane-todo": "kept"})

    assert first.rstrip().endswith("[DONE]") if stream else first == "stored on the way"
    assert client_messages(mproxy) == []  # the client resends it: its answer did not wait
    history += [
        {"role": "assistant", "content": "stored on the way"},
        {"role": "user", "content": "and then?"},
    ]
    ask(mproxy, KEY, history, stream=stream, **scaffolded)
    # a client that came back at once (`engine.pace`): its answer waited for its turn
    assert ("user", "and then?") in client_messages(mproxy)

    # shaped from what the first turn kept (its todo), once that was stored
    before, after = (request.json["messages"] for request in upstream.model_requests)
    assert after[: len(before)] == before
    assert any("<todo>\nkept\n</todo>" in message["content"] for message in before)
    mproxy.settled()
    assert [text for role, text in client_messages(mproxy) if role != "assistant"] == [
        "be brief",
        "hello",
        "and then?",
    ]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("why", ["another process may take the next turn", "under load"])
def test_the_answer_waits_for_the_turn(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
    why: str,
) -> None:
    """Another process reads the session from the store alone (`Runtime.serves_alone`);
    under load, answers that came back sooner would only wait in front of their next turn
    behind a deeper queue of stores."""
    under_load = why == "under load"
    proxy = proxy_factory(**QUIET) if under_load else proxy_factory(workers=2, **QUIET)
    slow_store(monkeypatch, upstream, "stored first")

    with contextlib.ExitStack() as others:
        for _ in range(2 if under_load else 0):  # other requests in memlane's hands
            others.enter_context(TRAFFIC.serving())
        ask(proxy, KEY, [{"role": "user", "content": "hello"}], stream=stream)

    assert client_messages(proxy)[:1] == [("user", "hello")]


def test_a_new_sessions_row_is_written_while_its_first_request_is_upstream(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in front of it (`engine.sessions.ahead`): first among the turn's writes."""
    reached = threading.Event()
    ahead = mproxy.runtime.sessions_ahead
    rows_upstream_saw: list[object] = []

    def answer(request: RecordedRequest) -> Reply:
        rows_upstream_saw.append(mproxy.runtime.store.find_session(KEY))
        reached.set()
        return Reply(text="a new session")

    monkeypatch.setattr(ahead, "write", held(reached, ahead.write, "the row was written"))
    upstream.respond_with(answer)

    ask(mproxy, KEY, [{"role": "user", "content": "hello"}], stream=True)

    assert rows_upstream_saw == [None]
    mproxy.settled()
    assert client_messages(mproxy)[:1] == [("user", "hello")]
    assert len(ahead) == 0


def test_a_turn_the_store_cannot_keep_still_gets_its_answer_and_the_next_turn_stores_it(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pipeline.store_incoming
    failures = iter([StoreError("database or disk is full")])

    def store_or_fail(rt: Any, turn: Turn) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        store(rt, turn)

    monkeypatch.setattr(pipeline, "store_incoming", store_or_fail)
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
