"""The memory book's cost per turn in the background, in a memory that already holds many.

Run: .venv/bin/python benchmarks/book_writes.py [--held 10000] [--turns 2000] [--no-git]
        [--sessions 1] [--per-conversation]

A proxy turn hands the book two entries (turns/user, turns/assistant) and queues a
commit (`MemoryBook.write`, `commit_later`): each becomes a Markdown file, index rows
and keyword postings, the snapshot (`memory_index.json`) notes it, and the queued
commits go to git once per `COMMIT_MAX_PENDING` changes. This script fills a home
with `--held` entries first (not measured), then writes `--turns` turns one exchange
at a time as the proxy's background does (after a search, as a proxy's requests
make: the in-process keyword index is loaded and kept up), and prints the CPU
milliseconds per turn (this process and the git it ran, user + system, with git's
part apart) and the wall time. Costs that grow with the whole memory (rewriting the
snapshot, git scanning every file) show up as the difference between a small `--held`
and a large one. `--sessions N` has N sessions write at once, as a proxy's
clients do: their writes wait for the book together and go in groups
(`book.writes`), so what a turn costs under load shows apart from what one
exchange written alone costs. `--per-conversation` gives each conversation its own
scope, and so its own folder, as the proxy's turn entries have (one scope for all
makes every commit rewrite a folder of thousands of files).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from memlane.config import Settings
from memlane.engine.memory.entries import new_fact
from memlane.engine.runtime import Runtime
from memlane.files.memory_files import new_id
from memlane.store.base import SearchFilter
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact

SEED_GROUP = 500


def cpu_seconds() -> tuple[float, float]:
    """(this process, the git processes it ran and waited for): user + system seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


PER_CONVERSATION = False
"""`--per-conversation`: each conversation its own scope (`conv:<id>`), as the proxy
writes turn entries, so each has its own folder; else one scope holds every turn."""


def exchange(number: int) -> list[Fact]:
    words = f"turn {number} about topic{number % 97} and item{number % 13}"
    return [
        new_fact(
            scope=f"conv:c{number // 25}" if PER_CONVERSATION else "ns:bench",
            conversation_id=f"c{number // 25}",
            role=role,
            text=f"{role} says {words}",
            fact_id=new_id(),
        )
        for role in ("user", "assistant")
    ]


async def run(held: int, turns: int, git: bool, sessions: int = 1) -> None:
    with tempfile.TemporaryDirectory(prefix="memlane-book-") as folder:
        home = Path(folder)
        settings = Settings(home=home, memory_extract_facts=False, memory_git=git)
        store = SQLiteStore(home / "memlane.db")
        try:
            rt = Runtime(settings, store)
            book = rt.memory_book
            await book.ready()
            for start in range(0, held // 2, SEED_GROUP):
                seed = [f for n in range(start, start + SEED_GROUP) for f in exchange(n)]
                await book.write(puts=seed, new={f.id for f in seed})
                book.commit_later(f"seed {start}")
                await book.flush()
            # a proxy searches on every request: its keyword index is loaded, and each
            # write's catch-up (`SQLiteSearch._catch_up`) is part of what a turn costs
            store.keyword_search("topic1 item2", SearchFilter(scopes=("ns:bench", "conv:c1")))
            began_cpu, began = cpu_seconds(), time.perf_counter()

            async def session(first: int) -> None:
                for n in range(held + first, held + turns // 2, sessions):
                    pair = exchange(n)
                    await book.write(puts=pair, new={f.id for f in pair})
                    book.commit_later(f"memory: 2 turn(s) in conversation c{n // 25}")

            await asyncio.gather(*(session(first) for first in range(sessions)))
            await rt.background.drain()
            await book.flush()
            (own, children), wall = cpu_seconds(), time.perf_counter() - began
        finally:
            store.close()
    own, children = own - began_cpu[0], children - began_cpu[1]
    print(
        f"book writes: {turns} turns into a memory of {held} entries, git "
        f"{'on' if git else 'off'}, {sessions} session(s) at once: "
        f"{(own + children) * 1000 / turns:.2f} ms CPU per turn "
        f"({children * 1000 / turns:.2f} of it in git), {wall:.1f} s wall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held", type=int, default=10_000, help="entries written first")
    parser.add_argument("--turns", type=int, default=2_000, help="turns measured")
    parser.add_argument("--no-git", action="store_true", help="MEMLANE_MEMORY_GIT=false")
    parser.add_argument("--sessions", type=int, default=1, help="sessions writing at once")
    parser.add_argument(
        "--per-conversation", action="store_true", help="a scope (folder) per conversation"
    )
    args = parser.parse_args()
    global PER_CONVERSATION
    PER_CONVERSATION = args.per_conversation
    asyncio.run(run(args.held, args.turns, not args.no_git, max(1, args.sessions)))


if __name__ == "__main__":
    main()
