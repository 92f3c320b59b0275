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
from tests.proxy.conftest import ask
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
