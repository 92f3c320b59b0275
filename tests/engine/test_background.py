"""Background work: its own thread pool, a bounded queue, cancellation at shutdown."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.engine import threads
from memlane.engine.background import Background
from memlane.store.write_gate import is_background_thread


def _thread_name() -> str:
    return threading.current_thread().name


async def test_background_blocking_calls_never_use_the_request_pool() -> None:
    background = Background()
    seen: list[str] = []

    async def work() -> None:
        seen.append(await threads.to_thread(_thread_name))

    background.spawn(work(), name="bg")
    await background.drain()
    foreground = await threads.to_thread(_thread_name)
    assert seen[0].startswith("memlane-bg")
    assert not foreground.startswith("memlane-bg")


async def test_background_threads_are_marked_so_the_store_lets_requests_write_first() -> None:
    background = Background()
    marked: list[bool] = []

    async def work() -> None:
        marked.append(await threads.to_thread(is_background_thread))

    background.spawn(work(), name="bg")
    await background.drain()
    assert marked == [True]
    assert not await threads.to_thread(is_background_thread)


async def test_a_full_queue_drops_background_work_not_the_caller() -> None:
    background = Background(max_pending=2)
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(n: int) -> None:
        await gate.wait()
        ran.append(n)

    tasks = [background.spawn(job(n), name=f"job-{n}") for n in range(4)]
    assert [t is not None for t in tasks] == [True, True, False, False]
    assert background.dropped == 2
    gate.set()
    await background.drain()
    assert sorted(ran) == [0, 1]


async def test_cancel_all_stops_what_is_still_running() -> None:
    background = Background()
    background.spawn(asyncio.sleep(3600), name="forever")
    assert await background.cancel_all() == 1
    assert background.pending == 0


async def test_a_service_is_tracked_logged_when_it_dies_and_never_drained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    background = Background()
    seen: list[str] = []
    crash = asyncio.Event()

    async def service() -> None:
        seen.append(await threads.to_thread(_thread_name))
        await crash.wait()
        raise OSError("inotify watch limit reached")

    background.start_service(service(), name="watcher")
    await asyncio.sleep(0.05)
    async with asyncio.timeout(1):
        await background.drain()  # returns at once: a service runs for the process's life
    assert background.services == ["watcher"]
    assert seen[0].startswith("memlane-bg")  # its blocking calls stay off the request pool
    crash.set()
    await asyncio.sleep(0.05)
    assert background.services == []
    assert "watcher" in caplog.text
    assert "inotify watch limit reached" in caplog.text


async def test_cancel_all_stops_services_and_counts_only_unfinished_jobs() -> None:
    background = Background()
    background.start_service(asyncio.sleep(3600), name="watcher")
    assert await background.cancel_all() == 0
    assert background.services == []
