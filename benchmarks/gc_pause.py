"""How long Python's full garbage collection stops a started proxy, before and after
`memlane serve` freezes its start-up heap (`proxy.serving.freeze_heap`).

Run: .venv/bin/python benchmarks/gc_pause.py [--runs 7]

A full collection walks every object the collector tracks and holds the GIL while it
does: the event loop, and every request in flight, wait for it. Python starts one on
its own once enough objects have survived younger collections, at a moment no one
chooses. This script starts the proxy's app in this process with the default settings
(an empty home; its lifespan opens the store, loads the tokenizers, warms the search
caches), then times `gc.collect()` `runs` times as it stands, and again once the heap is
frozen as `memlane serve` freezes it. Prints the objects tracked and the pause p50 / max
in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memlane.config import Settings  # noqa: E402
from memlane.proxy.app import create_app  # noqa: E402
from memlane.proxy.serving import collect_garbage, freeze_heap  # noqa: E402

WARM_SECONDS = 2.0
"""Time for the app's background warm-up (search caches) to finish before timing."""


def pauses(runs: int) -> list[float]:
    timed = []
    for _ in range(runs):
        started = time.perf_counter()
        gc.collect()
        timed.append((time.perf_counter() - started) * 1000)
    return timed


def row(label: str, timed: list[float]) -> str:
    tracked = len(gc.get_objects())
    return f"| {label} | {tracked:,} | {statistics.median(timed):.1f} | {max(timed):.1f} |"


async def measure(runs: int) -> list[str]:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), upstream_url="http://127.0.0.1:9/v1")
        app = create_app(settings)
        collect_garbage()
        async with app.router.lifespan_context(app):
            await asyncio.sleep(WARM_SECONDS)
            rows = [row("as started", pauses(runs))]
            freeze_heap()
            rows.append(row("start-up heap frozen", pauses(runs)))
            gc.unfreeze()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="collections timed per row")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.runs))
    print(f"\nA full collection in a started proxy (default settings), {args.runs} runs\n")
    print("| heap | objects tracked | pause p50 ms | pause max ms |")
    print("| --- | --- | --- | --- |")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
