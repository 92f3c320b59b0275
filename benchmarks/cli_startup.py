"""How long the `memlane` command takes before it does anything: start-up and import cost.

Run: .venv/bin/python benchmarks/cli_startup.py [--runs 20]

Each command is run `runs` times as a fresh process (what a person or a script
pays). Prints wall-clock p50 / min and the CPU time (user + system) p50: on a busy
machine the CPU time is the steadier figure. The target for `--version` and
`--help` is under 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

MEMLANE = Path(sys.executable).parent / "memlane"
COMMANDS = (
    ["--version"],
    ["--help"],
    ["sessions", "--help"],
)


def measure(args: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, float]:
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [str(MEMLANE), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            env=env,
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(walls), min(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    env = {**os.environ, "COLUMNS": "100"}
    with open("/proc/loadavg", encoding="utf-8") as handle:
        load = " ".join(handle.read().split()[:3])
    print(f"{options.runs} runs each, load average {load}\n")
    print("| command | wall p50 | wall min | CPU p50 |")
    print("| --- | --- | --- | --- |")
    for args in COMMANDS:
        p50, fastest, cpu = measure(args, options.runs, env)
        print(f"| `memlane {' '.join(args)}` | {p50:.3f} s | {fastest:.3f} s | {cpu:.3f} s |")


if __name__ == "__main__":
    main()
