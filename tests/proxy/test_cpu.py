"""CPU time by the part of memlane that spent it: `memlane status` and `load.py` read it."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from memlane.engine.threads import BACKGROUND_THREADS_NAME, BOOK_THREAD_NAME, REQUEST_THREADS_NAME
from memlane.proxy import cpu
from memlane.proxy.state import WorkerInfo
from memlane.proxy.status import merged
from memlane.store.group_commit import WRITER_THREAD_NAME
from memlane.store.sqlite.checkpoint import THREAD_NAME as CHECKPOINT_THREAD_NAME
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import ProxyFactory


@pytest.mark.parametrize(
    ("thread_name", "part"),
    [
        (f"{REQUEST_THREADS_NAME}_3", "request threads"),
        (WRITER_THREAD_NAME, "store writer"),
        (f"{BOOK_THREAD_NAME}_0", "memory book"),
        (f"{BACKGROUND_THREADS_NAME}_1", "background"),
        (f"{CHECKPOINT_THREAD_NAME} memlane.db-wal", "checkpoints"),
        ("Thread-7 (probe)", "other threads"),
    ],
)
def test_a_thread_counts_for_the_part_its_name_says(thread_name: str, part: str) -> None:
    assert cpu.part_of(thread_name) == part


def test_a_threads_cpu_time_is_counted_under_its_part() -> None:
    done = threading.Event()

    def burn() -> None:
        while time.thread_time() < 0.3:
            pass
        done.wait(10)

    book = threading.Thread(target=burn, name=f"{BOOK_THREAD_NAME}_0")
    book.start()
    try:
        while book.is_alive() and cpu.cpu_seconds().get("memory book", 0.0) < 0.25:
            time.sleep(0.02)
        spent = cpu.cpu_seconds()
    finally:
        done.set()
        book.join()
    assert spent["memory book"] >= 0.25
    assert spent[cpu.EVENT_LOOP] >= 0.0  # the caller's own thread
    parts = sum(
        seconds for part, seconds in spent.items() if part not in ("process", "helper processes")
    )
    assert spent[cpu.PROCESS] >= parts - 0.05  # every thread's time, ended ones too


def test_the_status_route_reports_each_parts_cpu_time(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    for turn in range(3):
        sdk(proxy, f"s{turn}").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
    proxy.drain()
    status = httpx.get(f"{proxy.base}/v1/memlane/status", headers=proxy.admin).json()
    spent = status["cpu_seconds"]
    assert {cpu.EVENT_LOOP, "store writer", cpu.PROCESS, cpu.HELPERS} <= set(spent)
    assert spent[cpu.PROCESS] > 0


def test_several_workers_cpu_times_add_up() -> None:
    worker = WorkerInfo(index=0, count=2, serving_since=datetime.now(UTC))
    first = {"cpu_seconds": {cpu.EVENT_LOOP: 1.5, "store writer": 0.5, cpu.PROCESS: 2.25}}
    second = {"cpu_seconds": {cpu.EVENT_LOOP: 2.0, "memory book": 1.0, cpu.PROCESS: 3.0}}
    total = merged(worker, [first, second])["cpu_seconds"]
    assert total == {
        cpu.EVENT_LOOP: 3.5,
        "store writer": 0.5,
        "memory book": 1.0,
        cpu.PROCESS: 5.25,
    }
