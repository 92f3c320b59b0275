"""The request path's threads: calls off the loop, and one trip with two results (the first
is the caller's as soon as it is ready)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from memlane.engine import threads

Trip = Callable[[Callable[[], Any], Callable[[Any], Any] | None], tuple[Any, Any]]


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


TRIPS = [pytest.param(threads.one_trip, id="one-trip"), pytest.param(threads.here, id="here")]
"""The same two results, from a worker thread or from the calling one."""


@pytest.mark.parametrize("trip", TRIPS)
async def test_a_failing_first_step_fails_the_first_and_cancels_the_second(trip: Trip) -> None:
    def first() -> int:
        raise ValueError("no shape")

    got_first, got_then = trip(first, lambda value: value)
    with pytest.raises(ValueError, match="no shape"):
        await got_first
    assert got_then is not None
    with pytest.raises(asyncio.CancelledError):
        await got_then


@pytest.mark.parametrize("trip", TRIPS)
async def test_a_failing_second_step_fails_only_the_second(trip: Trip) -> None:
    def then(value: int) -> int:
        raise RuntimeError("no search")

    got_first, got_then = trip(lambda: 1, then)
    assert await got_first == 1
    assert got_then is not None
    with pytest.raises(RuntimeError, match="no search"):
        await got_then


@pytest.mark.parametrize("trip", TRIPS)
async def test_without_a_second_step_there_is_one_result(trip: Trip) -> None:
    got_first, got_then = trip(lambda: "shaped", None)
    assert got_then is None
    assert await got_first == "shaped"


async def test_here_runs_both_steps_in_the_calling_thread() -> None:
    ran_in: list[str] = []

    def step(value: int) -> int:
        ran_in.append(threading.current_thread().name)
        return value + 1

    got_first, got_then = threads.here(lambda: step(0), step)
    assert got_first.done()
    assert got_then is not None
    assert got_then.done()
    assert (await got_first, await got_then) == (1, 2)
    assert ran_in == [threading.current_thread().name] * 2


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


async def test_a_request_path_call_runs_on_a_request_thread_in_the_callers_context() -> None:
    REQUEST_ID.set("r-1")

    def where() -> tuple[str, str]:
        return threading.current_thread().name, REQUEST_ID.get()

    name, seen = await threads.to_thread(where)
    assert name.startswith("memlane-request_")
    assert seen == "r-1"


async def test_a_failing_call_raises_in_the_caller() -> None:
    def broken() -> None:
        raise LookupError("no such session")

    with pytest.raises(LookupError, match="no such session"):
        await threads.to_thread(broken)


async def test_more_calls_than_threads_all_finish() -> None:
    def slow(n: int) -> int:
        time.sleep(0.01)
        return n

    count = threads.REQUEST_THREADS * 4
    done = await asyncio.wait_for(
        asyncio.gather(*(threads.to_thread(slow, n) for n in range(count))), 10
    )
    assert done == list(range(count))


async def test_a_cancelled_caller_leaves_the_call_to_finish_and_the_threads_serve_on() -> None:
    started, may_end, ended = threading.Event(), threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        assert may_end.wait(10)
        ended.set()

    waiting = asyncio.ensure_future(threads.to_thread(held))
    assert await asyncio.to_thread(started.wait, 5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    may_end.set()
    assert await asyncio.to_thread(ended.wait, 5)
    assert await threads.to_thread(lambda: "still serving") == "still serving"
