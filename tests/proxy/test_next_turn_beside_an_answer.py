"""A next turn that arrives while the answer before it is still being stored is shaped on
the event loop, not sent through a worker thread as if another request were in hand.

An agent sends its next request the moment it has an answer, and memlane stores that
answer just after the client has it, in a worker thread; so the next turn nearly
always arrives during that write.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memlane.engine import pipeline, turn_store
from memlane.engine.turn import Turn
from tests.proxy.conftest import ask, stored
from tests.support.upstream import Reply, RunningProxy, ScriptedUpstream

KEY = "beside-an-answer"


@pytest.mark.parametrize("stream", [False, True])
def test_a_next_turn_arriving_while_the_answer_is_stored_is_shaped_on_the_loop(
    mproxy: RunningProxy,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    storing, release = threading.Event(), threading.Event()
    store_answer, shape = turn_store.store_answer, pipeline.shape
    shaped_on: list[str] = []

    def slow_store_answer(rt: Any, turn: Turn, answer: Any) -> None:
        storing.set()
        assert release.wait(10), "the test never let the answer be stored"
        store_answer(rt, turn, answer)

    def recorded_shape(rt: Any, turn: Turn) -> Any:
        shaped_on.append(threading.current_thread().name)
        return shape(rt, turn)

    monkeypatch.setattr(turn_store, "store_answer", slow_store_answer)
    monkeypatch.setattr(pipeline, "shape", recorded_shape)
    upstream.script(Reply(text="first answer"), Reply(text="second answer"))
    first = [{"role": "user", "content": "first question"}]
    ask(mproxy, KEY, first, stream=stream)
    assert storing.wait(10)  # the first answer is being stored, and stays so for now
    second = [
        *first,
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]

    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(ask, mproxy, KEY, second, stream=stream)
        try:
            for _ in range(200):
                if len(shaped_on) == 2 or answered.done():
                    break
                threading.Event().wait(0.05)
        finally:
            release.set()
        answered.result(timeout=30)

    # both only read: the first made its session ahead of the row, the second found the row
    assert len(shaped_on) == 2, shaped_on
    assert not any(name.startswith("memlane-request") for name in shaped_on), shaped_on


@pytest.mark.parametrize("stream", [False, True])
def test_a_next_turn_does_not_wait_for_the_answer_it_resends_to_be_stored(
    mproxy: RunningProxy,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    """The client resends the answer, so while that answer's write is all the writer has
    to do its next turn is answered beside it; the turn's own messages are stored after
    it, in order, once."""
    storing, release = threading.Event(), threading.Event()
    store_answer = turn_store.store_answer
    held: list[str] = []

    def held_store_answer(rt: Any, turn: Turn, answer: Any) -> None:
        if not held:  # the first answer only: the second is queued behind it anyway
            held.append(turn.key)
            storing.set()
            assert release.wait(30), "the test never let the answer be stored"
        store_answer(rt, turn, answer)

    monkeypatch.setattr(turn_store, "store_answer", held_store_answer)
    # the first answer comes late enough for its turn's messages to be committed first
    upstream.script(Reply(text="first answer", latency=0.3), Reply(text="second answer"))
    first = [{"role": "user", "content": "first question"}]
    ask(mproxy, KEY, first, stream=stream)
    assert storing.wait(10)
    second = [
        *first,
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    wait_limit = mproxy.runtime.settings.request_wait_seconds
    with ThreadPoolExecutor(1) as pool:
        answered = pool.submit(ask, mproxy, KEY, second, stream=stream)
        try:
            # well inside the wait a turn would give its session's earlier writes
            got = answered.result(timeout=wait_limit / 2)
            assert "[DONE]" in got if stream else got == "second answer"
            assert not release.is_set()
        finally:
            release.set()

    assert [(role, text, status) for role, _, _, text, status in stored(mproxy, KEY)] == [
        ("user", "first question", "ok"),
        ("assistant", "first answer", "ok"),
        ("user", "second question", "ok"),
        ("assistant", "second answer", "ok"),
    ]
    assert len(upstream.requests) == 2
