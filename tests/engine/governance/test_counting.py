"""A request's exact count is made once, off its front: on the loop while it is upstream,
or when its answer needs it, and on a worker thread while other requests are in hand."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.engine import threads
from memlane.engine.governance.counting import AFTER_SECONDS, ON_LOOP_CHARS, Counting


class Recorder:
    """A count of 42 that notes the thread it ran in; what was reported."""

    def __init__(self, fail: bool = False) -> None:
        self.threads: list[int] = []
        self.reported: list[int] = []
        self.fail = fail

    def count(self) -> int:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise RuntimeError("tokenizer broke")
        return 42

    def counting(self, chars: int = 9_000) -> Counting:
        return Counting(self.count, self.reported.append, key="session-key", chars=chars)


async def test_it_counts_on_the_loop_a_moment_after_the_request_went_upstream() -> None:
    recorder = Recorder()
    recorder.counting().soon()
    assert recorder.threads == []  # not in front of the request
    await asyncio.sleep(AFTER_SECONDS * 5)
    assert recorder.threads == [threading.get_ident()]
    assert recorder.reported == [42]


async def test_an_answer_that_needs_it_sooner_counts_it_then_and_only_once() -> None:
    recorder = Recorder()
    counting = recorder.counting()
    counting.soon()
    with threads.TRAFFIC.serving():  # the answer's own request, back in memlane's hands
        await counting.done()
    assert recorder.reported == [42]
    await asyncio.sleep(AFTER_SECONDS * 5)
    assert recorder.threads == [threading.get_ident()]
    assert recorder.reported == [42]


async def test_while_another_request_is_in_hand_it_counts_on_a_worker_thread() -> None:
    recorder = Recorder()
    counting = recorder.counting()
    with threads.TRAFFIC.serving():  # another request, being shaped on the loop
        counting.soon()
        await asyncio.sleep(AFTER_SECONDS * 5)
        await counting.done()
    assert recorder.reported == [42]
    assert len(recorder.threads) == 1
    assert recorder.threads[0] != threading.get_ident()


async def test_a_large_request_is_counted_on_a_worker_thread_even_alone() -> None:
    """Encoding it would hold the loop (and its own stream's first bytes) for milliseconds."""
    recorder = Recorder()
    counting = recorder.counting(chars=ON_LOOP_CHARS + 1)
    counting.soon()
    await asyncio.sleep(AFTER_SECONDS * 5)
    with threads.TRAFFIC.serving():
        await counting.done()
    assert recorder.reported == [42]
    assert len(recorder.threads) == 1
    assert recorder.threads[0] != threading.get_ident()


@pytest.mark.parametrize("busy", [False, True])
async def test_a_count_that_fails_is_left_out_and_never_raises(
    busy: bool, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(fail=True)
    counting = recorder.counting()
    with threads.TRAFFIC.serving():
        if busy:
            with threads.TRAFFIC.serving():
                await counting.done()
        else:
            await counting.done()
    assert recorder.reported == []
    assert len(recorder.threads) == 1
    assert "could not count the tokens of session-" in caplog.text


async def test_it_is_finished_once_counted_so_an_answer_need_not_wait_for_it() -> None:
    """The answer's headers await the count only while it is still to come (an await of a
    count already in cost the answer a task and two turns of the loop)."""
    recorder = Recorder()
    on_loop = recorder.counting()
    assert not on_loop.finished  # not started
    on_loop.soon()
    await asyncio.sleep(AFTER_SECONDS * 5)
    assert on_loop.finished

    in_thread = recorder.counting(chars=ON_LOOP_CHARS + 1)
    in_thread.soon()
    await asyncio.sleep(AFTER_SECONDS * 2)
    assert not in_thread.finished or recorder.reported == [42, 42]
    await in_thread.done()
    assert in_thread.finished
    assert recorder.reported == [42, 42]
