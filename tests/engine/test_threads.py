"""One worker-thread trip with two results: the first is the caller's as soon as it is ready."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.engine import threads


async def test_the_first_result_arrives_while_the_second_is_still_running() -> None:
    second_may_end = threading.Event()
    ran_in: list[str] = []

    def first() -> int:
        ran_in.append(threading.current_thread().name)
        return 2

    def then(value: int) -> int:
        ran_in.append(threading.current_thread().name)
        assert second_may_end.wait(10)
        return value * 10

    got_first, got_then = threads.one_trip(first, then)
    assert got_then is not None
    assert await asyncio.wait_for(got_first, 5) == 2
    assert not got_then.done()
    second_may_end.set()
    assert await asyncio.wait_for(got_then, 5) == 20
    assert len(set(ran_in)) == 1  # one trip
    assert ran_in[0] != threading.current_thread().name


async def test_a_failing_first_step_fails_the_first_and_cancels_the_second() -> None:
    def first() -> int:
        raise ValueError("no shape")

    got_first, got_then = threads.one_trip(first, lambda value: value)
    with pytest.raises(ValueError, match="no shape"):
        await got_first
    assert got_then is not None
    with pytest.raises(asyncio.CancelledError):
        await got_then


async def test_a_failing_second_step_fails_only_the_second() -> None:
    def then(value: int) -> int:
        raise RuntimeError("no search")

    got_first, got_then = threads.one_trip(lambda: 1, then)
    assert await got_first == 1
    assert got_then is not None
    with pytest.raises(RuntimeError, match="no search"):
        await got_then


async def test_without_a_second_step_there_is_one_result() -> None:
    got_first, got_then = threads.one_trip(lambda: "shaped", None)
    assert got_then is None
    assert await got_first == "shaped"
