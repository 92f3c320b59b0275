"""How much slower the proxy's code runs when it last ran a moment ago: the machine's
part of one client's overhead.

Run: .venv/bin/python benchmarks/cold_paths.py [--runs 30]

One client behind a 300 ms upstream sends its next request after the proxy has spent
300 ms waiting: every step of the request path (the session's read, the parse, the
relay) then runs on caches that other work on the machine has used meanwhile. This
script times two such steps after pauses of 0, 1, 10, 50 and 300 ms, spent either
asleep or spinning in a Python loop (so it is not the idle CPU that matters, but the
time since the code and data last ran):

- a session's read as a request does it (`Store.find_session_state`, the store on the
  default SQLite file, 50 sessions with their state);
- `json.loads` of `proxy_overhead.py`'s 20-message Chat Completions body (a request's
  parse).

Printed: p50 microseconds per pause, and the factor over no pause. On the 2-core
virtual machine the benchmarks run on, 300 ms later both take 4-10 times as long as
warm: a figure for one client there says as much about the machine as about memlane
(`docs/benchmarks.md`, "One client and the machine's caches").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memlane.config import Settings  # noqa: E402
from memlane.store.factory import open_store  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import proxy_overhead as po  # noqa: E402

PAUSES_MS = (0, 1, 10, 50, 300)


def spin(seconds: float) -> None:
    """Busy for `seconds` in a tight loop that touches almost no memory."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        pass


def timed_after(
    step: Callable[[], object], pause: Callable[[float], None], ms: int, runs: int
) -> float:
    """p50 microseconds of `step` run right after `pause(ms)`."""
    taken = []
    for _ in range(runs):
        pause(ms / 1000)
        started = time.perf_counter()
        step()
        taken.append((time.perf_counter() - started) * 1e6)
    return statistics.median(taken)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timings per pause")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        store = open_store(Settings(home=Path(home)))
        for n in range(50):
            session = store.ensure_session(f"session-{n}")
            store.set_state(session.id, "todo", "- [ ] a task\n" * 10)
        text = json.dumps({"model": "bench", "messages": po.conversation("cold"), "stream": True})
        steps: dict[str, Callable[[], object]] = {
            "session read": lambda: store.find_session_state("session-7"),
            "parse a request": lambda: json.loads(text),
        }
        print("| step | pause spent | " + " | ".join(f"{ms} ms" for ms in PAUSES_MS) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in PAUSES_MS) + " |")
        for label, step in steps.items():
            for how, pause in (("asleep", time.sleep), ("spinning", spin)):
                p50 = [timed_after(step, pause, ms, args.runs) for ms in PAUSES_MS]
                cells = [f"{p50[0]:.0f} µs"] + [f"{v:.0f} µs ({v / p50[0]:.1f}×)" for v in p50[1:]]
                print(f"| {label} | {how} | " + " | ".join(cells) + " |")
        store.close()


if __name__ == "__main__":
    main()
