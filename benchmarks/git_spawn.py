"""What starting `git` costs a process the size of a running proxy, two ways.

Run: .venv/bin/python benchmarks/git_spawn.py [--mb 50 300] [--spawns 40]

For each resident size (`--mb`: that many MiB allocated and touched first, as a
proxy under load holds a few hundred), `git --version` is started `--spawns` times:

- `asyncio`: an asyncio subprocess on uvloop (what memlane's git calls were): the
  start runs on the event loop. Prints the event loop's time in the start (p50),
  and the process's CPU per start.
- `thread`: `subprocess.run` in a worker thread (what they are, `files.git`): the
  CPU per start, then, with a task on the loop ticking every millisecond, the
  longest the loop was late for a tick.

uvloop forks the whole process, and a fork copies its page tables, so its cost
grows with the resident memory; CPython's `subprocess` uses `vfork` on Linux.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time

import uvloop

PAGE = 4096
TICK = 0.001


def ballast(mb: int) -> list[bytearray]:
    """`mb` MiB allocated and touched (a page at a time), so they are resident."""
    blocks = [bytearray(1024 * 1024) for _ in range(mb)]
    for block in blocks:
        block[::PAGE] = b"\x01" * len(block[::PAGE])
    return blocks


async def on_the_loop(spawns: int) -> tuple[float, float]:
    """The loop's time in each start (p50, ms) and the CPU per start (ms)."""
    held: list[float] = []
    cpu = time.process_time()
    for _ in range(spawns):
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            "git",
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        held.append(time.perf_counter() - started)
        await proc.communicate()
    per_start = (time.process_time() - cpu) / spawns
    return sorted(held)[spawns // 2] * 1e3, per_start * 1e3


def _git_version() -> None:
    subprocess.run(["git", "--version"], capture_output=True, stdin=subprocess.DEVNULL, check=True)


async def from_a_thread(spawns: int) -> tuple[float, float]:
    """The longest the loop went without a tick (ms), with a task that ticks every
    millisecond meanwhile, and the CPU per start (ms), measured without it."""
    cpu = time.process_time()
    for _ in range(spawns):
        await asyncio.to_thread(_git_version)
    per_start = (time.process_time() - cpu) / spawns
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            gaps.append(now - last - TICK)
            last = now

    ticker = asyncio.ensure_future(tick())
    for _ in range(spawns):
        await asyncio.to_thread(_git_version)
    done = True
    await ticker
    return max(gaps) * 1e3, per_start * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[50, 300])
    parser.add_argument("--spawns", type=int, default=40)
    args = parser.parse_args()
    print(
        "| resident | asyncio: loop held p50 | asyncio: CPU a start | thread: longest loop gap "
        "| thread: CPU a start |"
    )
    print("| --- | --- | --- | --- | --- |")
    for mb in args.mb:
        kept = ballast(mb)
        held, loop_cpu = uvloop.run(on_the_loop(args.spawns))
        gap, thread_cpu = uvloop.run(from_a_thread(args.spawns))
        print(
            f"| {mb} MiB | {held:.2f} ms | {loop_cpu:.2f} ms | {gap:.2f} ms | {thread_cpu:.2f} ms |"
        )
        del kept


if __name__ == "__main__":
    main()
