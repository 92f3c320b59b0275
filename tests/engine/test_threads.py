"""The request path's threads: calls off the loop, awaited (`to_thread`) or started and left
to finish (`in_a_request_thread`)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time

import pytest

from memlane.engine import threads

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


async def test_a_call_started_in_a_request_thread_runs_there_in_the_callers_context() -> None:
    REQUEST_ID.set("r-2")

    def where() -> tuple[str, str]:
        return threading.current_thread().name, REQUEST_ID.get()

    started = threads.in_a_request_thread(where)
    name, seen = await asyncio.wait_for(started, 5)
    assert name.startswith("memlane-request_")
    assert seen == "r-2"


async def test_a_call_started_in_a_request_thread_runs_while_the_caller_goes_on() -> None:
    may_end = threading.Event()

    def held() -> str:
        assert may_end.wait(10)
        return "counted"

    started = threads.in_a_request_thread(held)
    await asyncio.sleep(0)
    assert not started.done()  # the caller was not held up by it
    may_end.set()
    assert await asyncio.wait_for(started, 5) == "counted"


async def test_a_failing_call_started_and_left_keeps_its_error_for_whoever_awaits_it() -> None:
    def broken() -> None:
        raise LookupError("no tokenizer")

    started = threads.in_a_request_thread(broken)
    with pytest.raises(LookupError, match="no tokenizer"):
        await asyncio.wait_for(started, 5)


async def test_a_failing_call_nobody_awaits_is_not_reported_as_never_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise LookupError("left alone")

    started = threads.in_a_request_thread(broken)
    await asyncio.wait([started], timeout=5)
    assert started.done()
    del started
    gc.collect()
    assert "never retrieved" not in caplog.text
