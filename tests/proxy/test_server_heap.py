"""`memlane serve` frees start-up's garbage, freezes what start-up built, then collects the
young generation less often (`proxy.serving`)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from memlane.engine.heap import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, MMAP_THRESHOLD, TRIM_THRESHOLD
from memlane.proxy import serving
from memlane.proxy.serving import YOUNG_COLLECTION_THRESHOLD, MemlaneServer
from tests.support.loopback import loopback_socket


async def _app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("no request is sent")


class _Cycle:
    """Garbage only a collection frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_idle() -> Iterator[None]:
    """No automatic collection while a test runs (the server's is the one that counts), and
    no object of this process left frozen after it."""
    gc.unfreeze()
    gc.disable()
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
        gc.unfreeze()


def _serve_in_thread() -> tuple[MemlaneServer, threading.Thread]:
    config = uvicorn.Config(_app, lifespan="off", log_level="warning")
    serving = threading.Event()  # told once start-up is over, as a worker tells its supervisor
    server = MemlaneServer(config, on_started=serving.set)
    sock = loopback_socket()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert serving.wait(10), "the server did not start"
    return server, thread


def _is_seen_by_collector(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())  # the permanent generation is not listed


def test_serving_frees_start_up_garbage_and_freezes_the_rest(collector_idle: None) -> None:
    built_before = [["start-up state"]]
    garbage = weakref.ref(_Cycle())
    assert garbage() is not None
    assert _is_seen_by_collector(built_before)

    server, thread = _serve_in_thread()
    try:
        assert garbage() is None  # collected before freezing, not kept for good
        assert gc.get_freeze_count() > 0
        assert not _is_seen_by_collector(built_before)
        built_after = [["a request's state"]]
        assert _is_seen_by_collector(built_after)  # what comes later is collected as before
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_serving_collects_the_young_generation_less_often(collector_idle: None) -> None:
    gc.set_threshold(700, 10, 10)  # Python's defaults
    server, thread = _serve_in_thread()
    try:
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 10, 10)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_serving_fixes_the_allocators_thresholds(
    collector_idle: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The serving process, not a library user's: glibc's mmap and trim thresholds fixed
    at their starting values (`engine.heap.tune_allocator`)."""
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    monkeypatch.setattr(serving, "glibc_mallopt", lambda: mallopt)
    server, thread = _serve_in_thread()
    try:
        assert calls == [(M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD)]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
