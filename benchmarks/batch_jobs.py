"""What one batch job of a session's background work costs in CPU, fixed and per turn.

Run: .venv/bin/python benchmarks/batch_jobs.py [--sessions 24] [--turns 24] [--batch 8]
        [--steps] [--no-ingest] [--no-index] [--git]

A session's turns are remembered and indexed in batches (`Background.batch`,
`memory_batch_turns`): one memory job (`ingest._recorded`: turn entries, one extraction,
reconciliation against the neighbourhood, the conversation's summary, eviction, the
session's mark) and one index job (`indexing._after_turns`: the title, whether enough is
new, the session index) per batch. This script runs those jobs in this process, one at a
time, as a proxy's background would after `--batch` turns of each session, and prints
the CPU milliseconds (this process, user + system, the system part apart) per job and
per turn. The turns are stored as a proxy stores them (not measured); memlane's own LLM
calls go to the scripted upstream of `write_path.py` (one fact per message, ADD for
each), run in a process of its own so its CPU is not counted.

Comparing `--batch 1` with `--batch 8` gives the fixed cost of a job and the cost of a
turn; a large `--turns` shows what grows with a session's length (the index's prompt).
`--steps` splits a job's CPU by step (nested steps are counted in their caller too).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import multiprocessing
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import loadavg  # noqa: E402  (after the path is set)
from benchmarks.proxy_overhead import ANSWER  # noqa: E402
from benchmarks.write_path import user_text  # noqa: E402

from memlane.config import Settings  # noqa: E402
from memlane.engine.memory import ingest  # noqa: E402
from memlane.engine.memory.book import MemoryBook  # noqa: E402
from memlane.engine.memory.turn_input import TurnInput  # noqa: E402
from memlane.engine.runtime import Runtime  # noqa: E402
from memlane.engine.sessions import indexing  # noqa: E402
from memlane.files.memory_files import now_utc  # noqa: E402
from memlane.store import NewMessage  # noqa: E402
from memlane.store.sqlite import SQLiteStore  # noqa: E402
from memlane.text import llm  # noqa: E402
from memlane.types import Message  # noqa: E402

STEPS: Counter[str] = Counter()


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def kernel_seconds() -> float:
    """The kernel's part (creating and fsyncing files, mostly): it varies with the disk's
    other work more than the rest does."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def timed(owner: Any, name: str, label: str) -> None:
    """Count the CPU `owner.name` takes under `label` (the jobs run one at a time)."""
    fn: Callable[..., Any] = getattr(owner, name)

    async def waited(*args: Any, **kwargs: Any) -> Any:
        start = cpu()
        try:
            return await fn(*args, **kwargs)
        finally:
            STEPS[label] += cpu() - start

    def called(*args: Any, **kwargs: Any) -> Any:
        start = cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS[label] += cpu() - start

    wrapper = waited if inspect.iscoroutinefunction(fn) else called
    setattr(owner, name, functools.wraps(fn)(wrapper))


def time_steps() -> None:
    for name in ("extract_batch", "reconcile", "_update_summary", "evict_conversation"):
        timed(ingest, name, f"memory: {name}")
    timed(ingest, "_remembered", "memory: the session's mark")
    timed(ingest, "neighbourhood", "memory: neighbourhood")
    timed(ingest, "apply_plan", "memory: apply_plan")
    timed(MemoryBook, "write", "book.write (every job)")
    timed(indexing, "_title_and_due", "index: title and due")
    timed(indexing, "index_session", "index: index_session")
    timed(indexing, "_save", "index: save")
    timed(llm, "redacted", "own LLM calls: redaction")


def serve_upstream(ready: multiprocessing.Queue[str]) -> None:
    from benchmarks.write_path import start_upstream

    ready.put(start_upstream(Counter()))
    while True:
        time.sleep(3600)


async def run(args: argparse.Namespace, url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="memlane-jobs-") as folder:
        home = Path(folder)
        store = SQLiteStore(home / "memlane.db")
        rt = Runtime(Settings(home=home, upstream_url=url, memory_git=args.git), store)
        rt.llm_clients = llm.ClientPool()  # as the proxy's: one pooled client
        await rt.memory_book.ready()
        spent = {"memory": 0.0, "index": 0.0}
        kernel = {"memory": 0.0, "index": 0.0}
        jobs = 0
        try:
            for number in range(args.sessions):
                session = store.ensure_session(f"bench-{number}")
                system = NewMessage(Message(role="system", text="Be brief."))
                store.append_messages(session.id, [system])
                for first in range(0, args.turns, args.batch):
                    items = []
                    for turn in range(first, min(first + args.batch, args.turns)):
                        said = user_text(number, turn)
                        stored = store.append_messages(
                            session.id,
                            [
                                NewMessage(Message(role="user", text=said)),
                                NewMessage(Message(role="assistant", text=ANSWER)),
                            ],
                        )
                        items.append(
                            TurnInput(
                                session_id=session.id,
                                namespace=session.namespace,
                                model=rt.memory_model("bench"),
                                user_text=said,
                                user_message_id=stored[0].id,
                                assistant_text=ANSWER,
                                said_at=now_utc(),
                                user_position=stored[0].position,
                            )
                        )
                    if not args.no_ingest:
                        start, in_kernel = cpu(), kernel_seconds()
                        await ingest._recorded(rt, list(items))
                        spent["memory"] += cpu() - start
                        kernel["memory"] += kernel_seconds() - in_kernel
                    if not args.no_index:
                        start, in_kernel = cpu(), kernel_seconds()
                        models = ["bench"] * len(items)
                        await indexing._after_turns(rt, session.id, models, indexing=True)
                        spent["index"] += cpu() - start
                        kernel["index"] += kernel_seconds() - in_kernel
                    jobs += 1
        finally:
            await rt.llm_clients.aclose()
            await rt.background.drain()
        turns = args.sessions * args.turns
        print("| job | CPU ms/job | of which system | CPU ms/turn |\n| --- | --- | --- | --- |")
        for kind, seconds in spent.items():
            print(
                f"| {kind} | {seconds / jobs * 1000:.2f} | {kernel[kind] / jobs * 1000:.2f} "
                f"| {seconds / turns * 1000:.2f} |"
            )
        if args.steps:
            print("\n| step | ms/job |\n| --- | --- |")
            for label, seconds in sorted(STEPS.items()):
                print(f"| {label} | {seconds / jobs * 1000:.2f} |")
        print(
            f"\n{args.sessions} sessions of {args.turns} turns, {jobs} batches of up to "
            f"{args.batch}; load average {loadavg()}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--turns", type=int, default=24, help="user turns per session")
    parser.add_argument("--batch", type=int, default=8, help="turns per job")
    parser.add_argument("--steps", action="store_true", help="CPU per step of a job")
    parser.add_argument("--no-ingest", action="store_true", help="no memory job")
    parser.add_argument("--no-index", action="store_true", help="no index job")
    parser.add_argument("--git", action="store_true", help="memory_git on (off by default)")
    args = parser.parse_args()
    if args.steps:
        time_steps()
    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream = multiprocessing.Process(target=serve_upstream, args=(ready,), daemon=True)
    upstream.start()
    try:
        asyncio.run(run(args, ready.get(timeout=60)))
    finally:
        upstream.terminate()


if __name__ == "__main__":
    main()
