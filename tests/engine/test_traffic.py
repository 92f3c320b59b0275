"""Requests in memlane's hands go first: background work waits for them, within a limit."""

from __future__ import annotations

import asyncio

from memlane.engine import threads
from memlane.engine.background import Background
from memlane.engine.threads import RequestTraffic


async def test_a_job_waits_while_a_request_is_served_and_runs_while_it_waits_upstream() -> None:
    background = Background()
    log: list[str] = []

    async def job() -> None:
        log.append("started")
        await threads.to_thread(log.append, "blocking step")

    with threads.TRAFFIC.serving():
        background.spawn(job(), name="job")
        await asyncio.sleep(0.1)
        assert log == []  # the request is still being prepared: nothing of the job ran
        with threads.TRAFFIC.waiting():  # the request waits on the upstream: the job runs
            await asyncio.wait_for(background.drain(), 5)
    assert log == ["started", "blocking step"]


async def test_a_blocking_step_of_running_background_work_waits_for_a_new_request() -> None:
    background = Background()
    log: list[str] = []
    started, arrived = asyncio.Event(), asyncio.Event()

    async def job() -> None:
        log.append("started")
        started.set()
        await arrived.wait()
        await threads.to_thread(log.append, "blocking step")

    background.spawn(job(), name="job")
    await asyncio.wait_for(started.wait(), 5)
    with threads.TRAFFIC.serving():
        arrived.set()
        await asyncio.sleep(0.05)
        assert log == ["started"]
    await asyncio.wait_for(background.drain(), 5)
    assert log == ["started", "blocking step"]


async def test_alone_means_at_most_the_callers_own_request_in_hand() -> None:
    traffic = RequestTraffic()
    assert traffic.alone
    with traffic.serving():
        assert traffic.alone  # the caller's own request
        with traffic.serving():
            assert not traffic.alone  # another one waits on the loop
        with traffic.waiting():
            assert traffic.alone
    assert traffic.alone


async def test_background_work_moves_on_under_a_steady_stream_of_requests() -> None:
    traffic = RequestTraffic()
    loop = asyncio.get_running_loop()
    with traffic.serving():
        began = loop.time()
        await traffic.yield_to_requests(limit=0.05)
        waited = loop.time() - began
    assert waited >= 0.04  # it did wait for the request…
    assert waited < 2  # …but not for ever


async def test_the_count_follows_serving_and_waiting_and_nothing_in_hand_means_no_wait() -> None:
    traffic = RequestTraffic()
    assert not traffic.busy
    with traffic.serving():
        assert traffic.busy
        with traffic.waiting():
            assert not traffic.busy
        assert traffic.busy
    assert not traffic.busy
    await asyncio.wait_for(traffic.yield_to_requests(limit=60), 1)
