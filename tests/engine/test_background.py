"""Background work: its own thread pool, a bounded queue, cancellation at shutdown."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from memlane.engine import threads
from memlane.engine.background import Background, BatchPolicy
from memlane.store.write_gate import is_background_thread


def _thread_name() -> str:
    return threading.current_thread().name


WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


class HeldRuns:
    """A batch's job that records the items of each run and holds it until `gate` is set:
    what a test needs to see what a job took, and what it holds while it runs."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.runs: list[list[Any]] = []

    async def __call__(self, items: list[Any]) -> None:
        self.runs.append(items)
        await self.gate.wait()


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


async def test_past_its_bound_a_spawned_job_waits_for_room_and_is_not_dropped() -> None:
    """A spawned job's work may be found nowhere else (a commit of the memory's queued
    changes, the results of memlane's own tool calls): a busy queue delays it, in the
    order spawned, and never drops it."""
    background = Background(max_pending=2)
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(n: int) -> None:
        await gate.wait()
        ran.append(n)

    assert all(background.spawn(job(n), name=f"job-{n}") for n in range(4))
    await asyncio.sleep(0.1)
    assert (background.pending, background.dropped, ran) == (4, 0, [])
    gate.set()
    await background.drain()
    assert (ran, background.pending) == ([0, 1, 2, 3], 0)


async def test_a_job_spawned_once_there_is_room_again_begins_after_those_that_waited() -> None:
    background = Background(max_pending=0)
    ran: list[int] = []

    async def job(n: int) -> None:
        ran.append(n)

    background.spawn(job(0), name="job-0")  # no room: it waits
    background.max_pending = 1  # room again (as a test of a full queue gives it back)
    background.spawn(job(1), name="job-1")
    await background.drain()
    assert ran == [0, 1]


async def test_past_both_bounds_a_spawned_job_is_dropped_not_the_caller() -> None:
    background = Background(max_pending=1, max_waiting=1)
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(n: int) -> None:
        await gate.wait()
        ran.append(n)

    assert [background.spawn(job(n), name=f"job-{n}") for n in range(3)] == [True, True, False]
    assert background.dropped == 1
    gate.set()
    await background.drain()
    assert ran == [0, 1]


async def test_a_spawned_job_that_waited_runs_in_its_callers_context() -> None:
    """What a job borrows from its request (the credential a client lent for memlane's
    own calls) is the request's that spawned it, however long it waited for room."""
    background = Background(max_pending=1)
    gate = asyncio.Event()
    seen: list[str] = []

    async def job() -> None:
        await gate.wait()
        seen.append(WHO.get())

    for who in ("first", "second"):
        WHO.set(who)
        background.spawn(job(), name=who)
    WHO.set("nobody")
    gate.set()
    await background.drain()
    assert seen == ["first", "second"]


async def test_cancel_all_counts_the_spawned_jobs_that_waited_and_never_runs_them() -> None:
    background = Background(max_pending=1)
    ran: list[str] = []

    async def job(name: str) -> None:
        ran.append(name)
        await asyncio.sleep(3600)

    for name in ("running", "waiting"):
        background.spawn(job(name), name=name)
    await asyncio.sleep(0.1)
    assert await background.cancel_all() == 2
    await asyncio.sleep(0.1)
    assert (ran, background.pending) == (["running"], 0)


async def test_a_drain_cut_short_leaves_its_jobs_for_cancel_all_to_count() -> None:
    """Shutdown bounds its drain, then reports what `cancel_all` stopped: a drain that
    cancelled the jobs itself on the way out would make that report say nothing."""
    background = Background()
    background.spawn(asyncio.sleep(3600), name="slow")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await background.drain()
    assert background.pending == 1
    assert await background.cancel_all() == 1


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


POLICY = BatchPolicy(quiet=3600, size=3)
"""Only a full batch or `drain` starts one: no timing in these tests."""


async def test_a_batch_collects_a_keys_items_into_one_job() -> None:
    background = Background()
    runs: list[list[int]] = []

    async def run(items: list[int]) -> None:
        runs.append(items)

    for n in range(2):
        background.batch("a", n, run, POLICY, name="a")
    background.batch("b", 9, run, POLICY, name="b")
    assert (background.batched, background.pending, runs) == (3, 3, [])
    await background.drain()
    assert sorted(runs) == [[0, 1], [9]]
    assert (background.batched, background.pending) == (0, 0)


async def test_a_full_batch_starts_at_once_and_one_job_per_key_runs_at_a_time() -> None:
    background = Background()
    run = HeldRuns()
    runs, gate = run.runs, run.gate
    policy = BatchPolicy(quiet=3600, size=3, most=3)

    for n in range(5):
        background.batch("a", n, run, policy, name="a")
    await asyncio.sleep(0.1)  # the job's start delay
    assert runs == [[0, 1, 2]]  # three made it full; the rest wait for the running job
    for n in range(5, 7):
        background.batch("a", n, run, policy, name="a")
    gate.set()
    await background.drain()
    assert runs == [[0, 1, 2], [3, 4, 5], [6]]


async def test_a_job_takes_what_came_while_it_waited_to_begin() -> None:
    """A full batch plans its job at once, but the job takes its items when it begins: the
    turns that came meanwhile go with it (up to `most`), not into a job of their own."""
    background = Background()
    runs: list[list[int]] = []

    async def run(items: list[int]) -> None:
        runs.append(items)

    for n in range(7):  # the third makes it full; four more come before the job begins
        background.batch("a", n, run, POLICY, name="a")
    await background.drain()
    assert runs == [[0, 1, 2, 3, 4, 5, 6]]


async def test_past_its_bound_a_key_waits_as_its_stand_in_only() -> None:
    """Over `max_batched`, an item is not kept: its key's stand-in is, once, and the job
    that takes it gets it (to re-read the rest); nothing is dropped, pending counts all."""
    background = Background(max_batched=2)
    runs: list[list[str]] = []
    policy = BatchPolicy(quiet=3600, size=10)

    async def run(items: list[str]) -> None:
        runs.append(items)

    for n in range(5):
        assert background.batch("a", f"turn {n}", run, policy, name="a", stand_in="reread a")
    assert background.batch("b", "turn 0", run, policy, name="b", stand_in="reread b")
    assert (background.batched, background.spilled, background.pending) == (2, 4, 6)
    assert not background.batch("c", "turn 0", run, policy, name="c")  # no stand-in: dropped
    assert background.dropped == 1
    await background.drain()
    assert sorted(runs) == [["reread b"], ["turn 0", "turn 1", "reread a"]]
    assert (background.batched, background.spilled, background.pending) == (0, 0, 0)


async def test_past_its_byte_bound_a_key_waits_as_its_stand_in_only() -> None:
    """The count alone does not bound memory (a turn may hold 64,000-character texts):
    past `max_batched_bytes`, an item is not kept either, however few items wait; a job
    holds its items' bytes until it ends, and gives them back then."""
    background = Background(max_batched=100, max_batched_bytes=10)
    run = HeldRuns()
    runs, gate = run.runs, run.gate

    policy = BatchPolicy(quiet=3600, size=2)
    for n in range(4):
        background.batch("a", f"a{n}", run, policy, name="a", stand_in="reread a", size=4)
    # a0 and a1 hold 8 bytes; a2 would pass 10: it and a3 wait as the stand-in only
    assert (background.batched, background.spilled, background.batched_bytes) == (2, 2, 8)
    await asyncio.sleep(0.1)
    assert runs == [["a0", "a1", "reread a"]]  # taken, their bytes held until the job ends
    assert (background.batched, background.spilled, background.batched_bytes) == (0, 0, 8)
    assert not background.batch("b", "b0", run, policy, name="b", size=4)  # no stand-in
    assert background.batch("c", "c0", run, policy, name="c", size=2)  # 10 bytes: room
    assert background.batched_bytes == 10
    gate.set()
    await background.drain()
    assert runs[1:] == [["c0"]]
    assert background.dropped == 1
    assert (background.batched, background.spilled, background.batched_bytes) == (0, 0, 0)


async def test_cancelled_work_gives_its_bytes_back() -> None:
    background = Background(max_batched_bytes=10)

    async def run(items: list[str]) -> None:
        raise AssertionError("never started")

    background.batch("a", "a0", run, BatchPolicy(quiet=3600, size=10), name="a", size=7)
    assert background.batched_bytes == 7
    await background.cancel_all()
    assert background.batched_bytes == 0


async def test_items_a_running_job_holds_count_against_the_bound() -> None:
    """A job keeps its items (and what it makes of them) until it ends: while it runs,
    they count against `max_batched`, so work queued in memory stays within it however
    many jobs have taken theirs and wait (on the book's writer, on the requests)."""
    background = Background(max_batched=3)
    run = HeldRuns()
    runs, gate = run.runs, run.gate

    policy = BatchPolicy(quiet=3600, size=2)
    for n in range(2):
        background.batch("a", f"a{n}", run, policy, name="a", stand_in="reread a")
    await asyncio.sleep(0.1)
    assert runs == [["a0", "a1"]]  # taken, held until the job ends
    for key in ("b", "c", "d"):
        background.batch(key, f"{key}0", run, policy, name=key, stand_in=f"reread {key}")
    assert (background.batched, background.spilled) == (1, 2)  # 2 held + 1 waiting: full
    gate.set()
    await background.drain()
    assert sorted(runs[1:]) == [["b0"], ["reread c"], ["reread d"]]
    background.batch("e", "e0", run, policy, name="e", stand_in="reread e")
    assert (background.batched, background.spilled) == (1, 0)  # ended jobs hold nothing


async def test_a_due_batch_waits_for_room_instead_of_being_dropped() -> None:
    background = Background(max_pending=1)
    run = HeldRuns()
    runs, gate = run.runs, run.gate

    for key in ("a", "b"):
        background.batch(key, 1, run, BatchPolicy(quiet=3600, size=1), name=key)
    await asyncio.sleep(0.1)
    assert (runs, background.pending) == ([[1]], 2)  # one job in flight, b's item waits
    gate.set()
    await background.drain()
    assert (runs, background.dropped) == ([[1], [1]], 0)


async def test_a_batch_runs_in_the_context_of_its_latest_item() -> None:
    background = Background()
    seen: list[str] = []

    async def run(items: list[int]) -> None:
        seen.append(WHO.get())

    for n, who in enumerate(["first", "latest"]):
        WHO.set(who)
        background.batch("a", n, run, POLICY, name="a")
    WHO.set("nobody")
    await background.drain()
    assert seen == ["latest"]


async def test_cancel_all_counts_the_items_still_waiting() -> None:
    background = Background()
    ran: list[int] = []

    async def run(items: list[int]) -> None:
        ran.extend(items)

    background.batch("a", 1, run, POLICY, name="a")
    background.batch("b", 2, run, POLICY, name="b")
    assert await background.cancel_all() == 2
    assert (background.pending, ran) == (0, [])


async def test_after_cancel_all_a_cancelled_job_plans_nothing_of_what_waited() -> None:
    background = Background()
    run = HeldRuns()
    runs = run.runs
    policy = BatchPolicy(quiet=3600, size=2, most=2)

    for n in range(4):
        background.batch("a", n, run, policy, name="a")
    await asyncio.sleep(0.1)  # the job began with two; two wait for it
    assert await background.cancel_all() == 3
    await asyncio.sleep(0.1)
    assert (runs, background.batched, background.pending) == ([[0, 1]], 0, 0)
