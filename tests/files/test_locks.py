"""Home locks: one holder at a time across processes and within one, dropped when a holder dies."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.files.locks import STRIPES, HomeLock, locks_dir

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memlane.files.locks import HomeLock
    with HomeLock(Path(sys.argv[1]), "memory").held():
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the home's `memory` lock until it is killed."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    yield process
    process.kill()
    process.wait()
    process.stdout.close()


async def test_a_lock_another_process_holds_is_not_taken_until_that_process_dies(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    lock = HomeLock(tmp_path, "memory")
    assert not _free(lock)
    waiting = asyncio.ensure_future(_take(lock))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # it waits for the other process
    holder.send_signal(signal.SIGKILL)  # dies without releasing: the kernel drops the lock
    assert await asyncio.wait_for(waiting, 10) == "taken"


def _free(lock: HomeLock) -> bool:
    """Whether nobody holds `lock`: another holder's view of it, from outside."""
    descriptor = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)  # drops the lock if it was taken here
    return True


async def _take(lock: HomeLock) -> str:
    async with lock.hold():
        return "taken"


async def test_two_holders_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    """Each acquisition opens the file anew: holders in one process exclude each other as
    processes do (the memory book's writers and the CLI's, in one test process)."""
    first, second = HomeLock(tmp_path, "memory"), HomeLock(tmp_path, "memory")
    order: list[str] = []

    async def hold(lock: HomeLock, name: str) -> None:
        async with lock.hold():
            order.append(f"{name} in")
            await asyncio.sleep(0.05)
            order.append(f"{name} out")

    await asyncio.gather(hold(first, "a"), hold(second, "b"))
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    assert _free(first)  # released after use


def test_a_blocking_holder_waits_for_the_other_process(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    got: list[str] = []

    def take() -> None:
        with HomeLock(tmp_path, "memory").held():
            got.append("taken")

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(0.3)
    assert got == []
    holder.kill()
    thread.join(10)
    assert got == ["taken"]


def test_striped_locks_are_stable_and_bounded(tmp_path: Path) -> None:
    a = HomeLock.striped(tmp_path, "session-index", "session-a")
    assert a.path == HomeLock.striped(tmp_path, "session-index", "session-a").path
    paths = {HomeLock.striped(tmp_path, "scope", f"key-{i}").path for i in range(1000)}
    assert len(paths) == STRIPES
    assert all(p.parent == locks_dir(tmp_path) for p in paths)


async def test_waiters_of_one_loop_queue_in_order_instead_of_racing_their_polls(
    tmp_path: Path,
) -> None:
    lock = HomeLock(tmp_path, "queue")
    order: list[str] = []
    release = asyncio.Event()

    async def holder(name: str, held: asyncio.Event | None = None) -> None:
        async with lock.hold():
            order.append(name)
            if held is not None:
                held.set()
                await release.wait()

    first_holds = asyncio.Event()
    first = asyncio.create_task(holder("first", first_holds))
    await first_holds.wait()
    early = asyncio.create_task(holder("early"))
    await asyncio.sleep(0.2)  # a polling waiter would be sleeping its longest step by now
    late = asyncio.create_task(holder("late"))
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(first, early, late)
    assert order == ["first", "early", "late"]


async def test_a_lock_whose_folder_was_removed_is_taken_again(tmp_path: Path) -> None:
    """The folder is made when a take finds it missing, not before every take: one
    removed meanwhile (a home cleaned by hand) is made again."""
    lock = HomeLock(tmp_path, "memory")
    async with lock.hold():
        pass
    lock.path.unlink()
    locks_dir(tmp_path).rmdir()
    async with lock.hold():
        assert lock.path.exists()
    lock.path.unlink()
    locks_dir(tmp_path).rmdir()
    with lock.held():
        assert lock.path.exists()
