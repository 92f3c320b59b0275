"""The C heap's free memory handed back as background jobs end, at most once a period."""

from __future__ import annotations

import threading

from memlane.engine.background import Background
from memlane.engine.heap import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    HeapTrim,
    glibc_mallopt,
    glibc_trim,
    tune_allocator,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Trims:
    """A stand-in for `malloc_trim`: counts calls and the threads they ran on."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ran = threading.Event()

    def __call__(self, pad: int) -> int:
        assert pad == 0
        self.calls.append(threading.current_thread().name)
        self.ran.set()
        return 1


async def _jobs(background: Background, count: int) -> None:
    async def job() -> None:
        return None

    for n in range(count):
        background.spawn(job(), name=f"job-{n}")
    await background.drain()


async def test_jobs_ending_give_the_heap_back_once_a_period_on_a_background_thread() -> None:
    clock, trims = _Clock(), _Trims()
    background = Background(heap=HeapTrim(trims, every=15.0, clock=clock))

    await _jobs(background, 3)  # within the first period: nothing yet
    assert trims.calls == []

    clock.now = 16.0
    await _jobs(background, 3)  # three jobs end past it: one trim, not three
    assert trims.ran.wait(10)
    assert len(trims.calls) == 1
    assert trims.calls[0].startswith("memlane-bg")  # never on the event loop
    assert background.heap.trims == 1

    trims.ran.clear()
    clock.now = 20.0
    await _jobs(background, 2)  # the next period has not come
    clock.now = 31.5
    await _jobs(background, 1)
    assert trims.ran.wait(10)
    assert len(trims.calls) == 2


def test_without_a_trim_function_nothing_is_ever_due() -> None:
    clock = _Clock()
    heap = HeapTrim(None, clock=clock)
    clock.now = 1e9
    assert not heap.due()
    heap.run()
    assert heap.trims == 0


def test_this_process_c_library_trims_its_heap() -> None:
    trim = glibc_trim()  # the test machines run glibc (Linux)
    assert trim is not None
    assert trim(0) in (0, 1)


def test_the_allocators_thresholds_are_fixed_at_their_starting_values() -> None:
    """glibc raises its mmap threshold each time a mapped block is freed, so megabyte
    buffers end up in the arenas: the serving process fixes both thresholds instead."""
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    assert tune_allocator(mallopt)
    assert calls == [(M_MMAP_THRESHOLD, 128 * 1024), (M_TRIM_THRESHOLD, 128 * 1024)]
    assert not tune_allocator(None)  # no glibc: nothing to tune


def test_the_real_mallopt_takes_the_thresholds() -> None:
    mallopt = glibc_mallopt()
    if glibc_trim() is None:  # not glibc: nothing is found, nothing tuned
        assert mallopt is None
        return
    assert mallopt is not None
    assert tune_allocator(mallopt)
