"""The store's write gate: one writer at a time, a request's write before background ones."""

from __future__ import annotations

import threading
import time

from memlane.store.write_gate import WriteGate, is_background_thread, mark_background_thread


def _wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def test_a_waiting_request_writer_goes_before_a_background_writer_that_came_first() -> None:
    gate = WriteGate()
    order: list[str] = []
    assert gate.acquire(timeout=1)  # a write in progress

    def writer(name: str, background: bool) -> None:
        if background:
            mark_background_thread()
        assert gate.acquire(timeout=10)
        order.append(name)
        gate.release()

    late = threading.Thread(target=writer, args=("background", True))
    late.start()
    _wait_until(lambda: gate.waiting == (0, 1), "the background writer waits")
    request = threading.Thread(target=writer, args=("request", False))
    request.start()
    _wait_until(lambda: gate.waiting == (1, 1), "both writers wait")
    gate.release()
    request.join(10)
    late.join(10)
    assert order == ["request", "background"]


def test_one_writer_at_a_time_and_a_timeout_says_so() -> None:
    gate = WriteGate()
    assert gate.acquire(timeout=1)
    assert not gate.acquire(timeout=0.01)  # held: the second writer gives up in time
    gate.release()
    assert gate.acquire(timeout=0.01)
    gate.release()


def test_only_marked_threads_are_background_ones() -> None:
    seen: list[bool] = []

    def mark_and_look() -> None:
        mark_background_thread()
        seen.append(is_background_thread())

    thread = threading.Thread(target=mark_and_look)
    thread.start()
    thread.join()
    assert seen == [True]
    assert not is_background_thread()  # this thread was never marked
