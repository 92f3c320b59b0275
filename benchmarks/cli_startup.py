"""How long the `memlane` command takes before it does anything: start-up and import cost.

Run: .venv/bin/python benchmarks/cli_startup.py [--runs 20] [--serve-runs 5]

Each command is run `runs` times as a fresh process (what a person or a script
pays). Prints wall-clock p50 / min and the CPU time (user + system) p50: on a busy
machine the CPU time is the steadier figure. The target for `--version` and
`--help` is under 0.3 s. Then `memlane serve` on an empty home, `--serve-runs`
times: the wall time from its spawn to the first `/health` that answers (what a
client started right after it waits), its p50 and min.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_overhead import free_port  # noqa: E402  (after the path is set)

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


def serve_start(runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Spawn to the first answered `/health`, each run on a new empty home."""
    walls: list[float] = []
    for _ in range(runs):
        port = free_port()
        with tempfile.TemporaryDirectory() as home:
            started = time.perf_counter()
            process = subprocess.Popen(
                [str(MEMLANE), "--home", home, "serve", "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**env, "MEMLANE_UPSTREAM_URL": "http://127.0.0.1:9/v1"},
            )
            try:
                while True:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                            break
                    except OSError:  # not listening yet, or not answering yet
                        if process.poll() is not None:
                            raise SystemExit("memlane serve exited before it answered") from None
                        time.sleep(0.01)
                walls.append(time.perf_counter() - started)
            finally:
                process.terminate()
                process.wait(30)
    return statistics.median(walls), min(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--serve-runs", type=int, default=5)
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
    if options.serve_runs > 0:
        p50, fastest = serve_start(options.serve_runs, env)
        runs = options.serve_runs
        print(f"\n`memlane serve`, spawn to the first answered /health ({runs} runs):")
        print(f"p50 {p50:.3f} s, min {fastest:.3f} s")


if __name__ == "__main__":
    main()
