"""Sessions: `@@` resolution and listing over many sessions, export/import of a long one.

Run: .venv/bin/python benchmarks/sessions_bench.py [--sessions 2000] [--messages 2000]

Everything runs on the embedded SQLite store in a temporary folder; no LLM is
called (references resolve to stored summaries).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.lookup import SessionLookupError, find_session
from memlane.engine.sessions.references import resolve_references
from memlane.engine.turn import Turn
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """p50 and p95 in milliseconds of `runs` calls."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def report(label: str, fn: Callable[[], object], runs: int) -> None:
    p50, p95 = timed(fn, runs)
    print(f"{label:<26} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memlane-sessions-bench-"))
    store = SQLiteStore(home / "memlane.db")
    rt = Runtime(Settings(home=home, embedding_backend="hashing"), store)

    for i in range(args.sessions):
        session = store.ensure_session(f"key-{i}")
        store.append_messages(session.id, [NewMessage(Message(role="user", text=f"topic {i}"), 3)])
        store.update_session(
            session.id,
            title=f"topic {i}",
            metadata={"name": f"project-{i}-work", "summary": f"summary {i}"},
        )
    print(f"{args.sessions} sessions stored")

    wanted = f"project-{args.sessions // 2}-work"
    report("find by exact name", lambda: find_session(store, wanted.upper()), 50)

    def fuzzy() -> None:
        # among 2,000 near-identical names a typo is often honestly ambiguous
        with contextlib.suppress(SessionLookupError):
            find_session(store, wanted.replace("work", "wrk"))

    report("find by fuzzy name", fuzzy, 20)

    def reference() -> None:
        turn = Turn(
            key="asker",
            namespace="asker",
            model="m",
            wire="chat",
            ephemeral=True,
            messages=[Message(role="user", text=f"like @@{wanted}?")],
        )
        asyncio.run(resolve_references(rt, turn, list(turn.messages)))

    report("@@ reference (ephemeral)", reference, 20)
    report(
        "list with titles",
        lambda: [lifecycle.session_title(store, s) for s in store.list_sessions()],
        10,
    )

    long = store.ensure_session("long")
    roles = ("user", "assistant")
    store.append_messages(
        long.id,
        [
            NewMessage(Message(role=roles[i % 2], text=f"message {i} " * 20), 40)
            for i in range(args.messages)
        ],
    )
    long_session = store.get_session(long.id)
    assert long_session is not None
    start = time.perf_counter()
    lines = list(lifecycle.export_lines(store, long_session))
    exported = time.perf_counter() - start
    start = time.perf_counter()
    lifecycle.import_lines(store, lines, key="long-copy")
    imported = time.perf_counter() - start
    print(f"export {args.messages} messages  {exported * 1000:.0f} ms")
    print(f"import {args.messages} messages  {imported * 1000:.0f} ms")
    store.close()


if __name__ == "__main__":
    main()
