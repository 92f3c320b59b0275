"""Two processes writing to one SQLite store back to back, as `serve --workers 2` does.

Run: .venv/bin/python benchmarks/two_writers.py [--transactions 500] [--hold-ms 1]

Each process commits `--transactions` transactions that hold the write lock
`--hold-ms` (a batch's work, the GIL released), one right after the other. Printed per
process: its elapsed time, and the median and longest wait for the write lock. With
SQLite's busy handler alone, the waiting process sleeps up to 100 ms at a time while
the other commits again and again; queued on `store.sqlite.process_lock`, the two take
turns.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memlane.store.sqlite.store import SQLiteStore  # noqa: E402  (after the path is set)


def writer(
    path: str, transactions: int, hold: float, start_at: float, out: multiprocessing.Queue[str]
) -> None:
    store = SQLiteStore(Path(path))
    time.sleep(max(0.0, start_at - time.time()))  # both start together
    waits: list[float] = []
    started = time.perf_counter()
    for i in range(transactions):
        asked = time.perf_counter()
        with store._immediate() as db:
            waits.append(time.perf_counter() - asked)
            db.conn.execute("INSERT INTO bench(x) VALUES (?)", (i,))
            time.sleep(hold)
    elapsed = time.perf_counter() - started
    store.close()
    waits.sort()
    out.put(
        f"{elapsed:.2f} s, lock wait p50 {waits[len(waits) // 2] * 1000:.2f} ms, "
        f"longest {waits[-1] * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transactions", type=int, default=500)
    parser.add_argument("--hold-ms", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "memlane.db"
        store = SQLiteStore(path)
        store._conn().execute("CREATE TABLE bench(x)")
        store.close()
        out: multiprocessing.Queue[str] = multiprocessing.Queue()
        start_at = time.time() + 1.0
        processes = [
            multiprocessing.Process(
                target=writer,
                args=(str(path), args.transactions, args.hold_ms / 1000, start_at, out),
            )
            for _ in range(2)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        print(f"two processes, {args.transactions} transactions each, {args.hold_ms} ms held:")
        for n in range(len(processes)):
            print(f"  writer {n + 1}: {out.get()}")


if __name__ == "__main__":
    main()
