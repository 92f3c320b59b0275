"""What a turn's answer waits for before it goes out (`pipeline.ready_to_finish`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memlane.config import Settings
from memlane.engine import pipeline
from memlane.engine.governance.counting import Counting
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore


@pytest.fixture
async def rt(settings: Settings, sqlite_store: SQLiteStore) -> AsyncIterator[Runtime]:
    runtime = Runtime(settings, sqlite_store)
    yield runtime
    runtime.writes.close(timeout=10)


def _counted_turn(reported: list[int]) -> Turn:
    turn = Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[])
    turn.counting = Counting(lambda: 42, reported.append, key=turn.key, chars=10)
    return turn


async def test_a_count_made_while_the_request_was_upstream_does_not_hold_the_answer(
    rt: Runtime,
) -> None:
    """The answer goes out without giving the loop a turn: nothing is left to wait for."""
    reported: list[int] = []
    turn = _counted_turn(reported)
    assert turn.counting is not None
    await turn.counting.done()  # counted while the request was upstream
    assert reported == [42]
    waiting = pipeline.ready_to_finish(rt, turn)
    with pytest.raises(StopIteration):  # done at its first step: it never suspended
        waiting.send(None)


async def test_a_count_not_made_yet_is_made_before_the_answer_goes_out(rt: Runtime) -> None:
    reported: list[int] = []
    turn = _counted_turn(reported)
    await pipeline.ready_to_finish(rt, turn)
    assert reported == [42]
    assert turn.counting is not None
    assert turn.counting.finished
