"""Long-term memory: search latency by store size, and the write path's ingest rate.

Run: .venv/bin/python benchmarks/memory_bench.py [--sizes 10000 100000 1000000]
                                                  [--ingest 2000] [--queries 200]

Search latency: the whole read-path `search` as a request runs it with the
default settings (keyword candidates over context-expanded turn documents,
entity-aware expansion, recency, top 5; no model), and again without the
expansion ("no-exp"), over an embedded SQLite store holding N entries with
synthetic text (Zipf-distributed words plus identifiers). Nine entries in ten
are conversation turns, alternating user / assistant, in conversations of 50
turns, each indexed as memlane indexes a turn (its date, its own words twice,
the two turns before it and the one after); one in ten is a standalone fact
in one of 10 namespaces. Each query searches one conversation, its namespace
and `global`, as a proxy request does; a second set searches every scope (the
worst case, CLI administration only). The first query after loading warms the
store's in-process keyword index and is not counted; its time is printed as
"warm-up", and "RSS" is this process's resident memory after the queries.

Ingest: turns through the write path a proxy runs after each response
(`ingest_turn`: each user and assistant turn becomes a Markdown file and a
context-expanded index document, its neighbour re-indexed; fact extraction
off, as it is an LLM call; git on, commits coalesced and flushed at the end),
reported as turns per second.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlane.config import Settings
from memlane.engine.memory.ingest import TurnInput, ingest_turn
from memlane.engine.memory.scopes import GLOBAL, conversation_scope, namespace_scope
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.files.memory_files import new_id
from memlane.store.codec import fact_to_row
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact

NAMESPACES = 10
TURNS_PER_CONVERSATION = 50
FACT_SHARE = 10  # one entry in ten is a standalone fact
LOAD_BATCH = 20_000
IDENTIFIERS = ["src/app/main.py", "parse_config_file", "loadUserProfile", "E1234", "v2.3.1"]


COMMON = tuple(
    [
        "user",
        "project",
        "file",
        "config",
        "test",
        "build",
        "deploy",
        "server",
        "client",
        "error",
        "fix",
        "bug",
        "feature",
        "release",
        "branch",
        "merge",
        "review",
        "team",
        "meeting",
        "morning",
        "evening",
        "weekend",
        "family",
        "friend",
        "trip",
        "city",
        "book",
        "music",
        "coffee",
        "tea",
        "dinner",
        "lunch",
        "garden",
        "dog",
        "cat",
        "car",
        "bike",
        "train",
        "flight",
        "hotel",
        "plan",
        "week",
        "month",
        "year",
        "today",
        "tomorrow",
        "yesterday",
        "prefer",
        "like",
        "love",
        "hate",
        "want",
        "need",
        "use",
        "run",
        "write",
        "read",
        "work",
        "home",
        "office",
        "laptop",
        "phone",
        "email",
        "message",
        "note",
        "task",
        "list",
        "issue",
        "ticket",
        "database",
        "query",
        "cache",
        "memory",
        "disk",
        "network",
        "python",
        "rust",
        "java",
        "script",
        "module",
        "package",
        "version",
        "update",
        "install",
        "remove",
        "change",
        "move",
        "rename",
        "open",
        "close",
        "start",
        "stop",
        "debug",
        "log",
        "trace",
        "metric",
        "alert",
        "backup",
        "restore",
        "schedule",
        "holiday",
        "birthday",
        "doctor",
        "school",
        "course",
        "lesson",
        "exam",
        "paper",
        "story",
        "game",
        "movie",
        "song",
        "concert",
        "museum",
        "beach",
        "mountain",
        "lake",
        "river",
        "park",
        "street",
        "house",
        "room",
        "kitchen",
        "window",
        "door",
        "price",
        "budget",
        "invoice",
        "payment",
        "account",
        "password",
        "key",
        "token",
        "secret",
        "permission",
        "role",
        "admin",
    ]
)


def vocabulary(rng: random.Random) -> list[str]:
    """Common English words first (the head of the distribution), then rarer made-up ones."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    rare = ["".join(rng.choice(letters) for _ in range(rng.randint(4, 8))) for _ in range(20_000)]
    return [*COMMON, *rare]


def _weights(words: list[str]) -> list[float]:
    """Zipf-like, 1/(rank + 5): the most common word is in about a quarter of the memories."""
    return [1 / (rank + 5) for rank in range(len(words))]


_CUMULATIVE: dict[int, list[float]] = {}


def sentence(rng: random.Random, words: list[str]) -> str:
    cumulative = _CUMULATIVE.get(id(words))
    if cumulative is None:
        cumulative = _CUMULATIVE[id(words)] = list(itertools.accumulate(_weights(words)))
    picked = rng.choices(words, cum_weights=cumulative, k=12)
    if rng.random() < 0.2:
        picked.append(rng.choice(IDENTIFIERS))
    return " ".join(picked)


def entry(rng: random.Random, words: list[str], number: int, start: datetime) -> Fact:
    """The `number`-th entry of the store: a turn of conversation `number // 50`, or (one
    in ten) a fact of a namespace; turns come in time order, as a proxy writes them."""
    when = start + timedelta(seconds=number)
    conversation = number // TURNS_PER_CONVERSATION
    if number % FACT_SHARE == FACT_SHARE - 1:
        scope, role = namespace_scope(f"repo{conversation % NAMESPACES}"), "memory"
    else:
        scope, role = conversation_scope(f"c{conversation}"), ("user", "assistant")[number % 2]
    return Fact(
        id=new_id(),
        scope=scope,
        conversation_id=f"c{conversation}",
        role=role,  # type: ignore[arg-type]
        text=sentence(rng, words),
        created_at=when,
        updated_at=when,
    )


def build(store: SQLiteStore, size: int, rng: random.Random, words: list[str]) -> None:
    """Load `size` entries in big transactions (turns indexed with their neighbours)."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    done = 0
    while done < size:
        count = min(LOAD_BATCH, size - done)
        facts = [entry(rng, words, done + i, start) for i in range(count)]
        store.load("facts", [fact_to_row(f) for f in facts])
        done += count
        print(f"  loaded {done:,}/{size:,}", end="\r", flush=True)
    print(" " * 40, end="\r")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def latency(
    rt: Runtime, queries: list[str], conversations: int, scoped: bool
) -> tuple[float, float]:
    times = []
    for i, query in enumerate(queries):
        conversation = (i * 7919) % conversations
        scopes = (
            [
                conversation_scope(f"c{conversation}"),
                namespace_scope(f"repo{conversation % NAMESPACES}"),
                GLOBAL,
            ]
            if scoped
            else None
        )
        began = time.perf_counter()
        await search(rt, query, scopes=scopes)
        times.append((time.perf_counter() - began) * 1000)
    return percentile(times, 0.5), percentile(times, 0.95)


def rss_mb() -> float:
    """Resident memory of this process now (Linux), else its peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def search_bench(sizes: list[int], queries: int) -> None:
    print("search latency (ms), top 5, default read path (keyword over context-expanded turns)")
    print(
        f"{'entries':>10} {'request p50':>12} {'request p95':>12} {'no-exp p50':>11}"
        f" {'no-exp p95':>11} {'all p50':>9} {'all p95':>9}"
        f" {'warm-up s':>10} {'RSS MB':>8} {'load s':>8}"
    )
    for size in sizes:
        rng = random.Random(size)
        words = vocabulary(rng)
        with tempfile.TemporaryDirectory(prefix="memlane-bench-") as folder:
            home = Path(folder)
            store = SQLiteStore(home / "memlane.db")
            try:
                began = time.perf_counter()
                build(store, size, rng, words)
                loaded = time.perf_counter() - began
                rt = Runtime(Settings(home=home), store)
                asked = [" ".join(sentence(rng, words).split()[:6]) for _ in range(queries)]
                began = time.perf_counter()
                await search(rt, asked[0], scopes=None)  # warm the keyword index
                warm = time.perf_counter() - began
                conversations = size // TURNS_PER_CONVERSATION + 1
                s50, s95 = await latency(rt, asked, conversations, scoped=True)
                plain = Runtime(Settings(home=home, memory_entity_expansion=False), store)
                n50, n95 = await latency(plain, asked, conversations, scoped=True)
                a50, a95 = await latency(rt, asked, conversations, scoped=False)
                print(
                    f"{size:>10,} {s50:>12.2f} {s95:>12.2f} {n50:>11.2f} {n95:>11.2f}"
                    f" {a50:>9.1f} {a95:>9.1f} {warm:>10.1f} {rss_mb():>8,.0f} {loaded:>8.0f}",
                    flush=True,
                )
            finally:
                store.close()


async def ingest_bench(count: int) -> None:
    """`count` turns (half user, half assistant) through the write path, one exchange at a
    time, in conversations of 50 turns; git commits coalesced, the last flushed."""
    rng = random.Random(7)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="memlane-bench-") as folder:
        home = Path(folder)
        settings = Settings(home=home, memory_extract_facts=False)
        store = SQLiteStore(home / "memlane.db")
        try:
            rt = Runtime(settings, store)
            book = rt.memory_book
            await book.ready()
            exchanges = [
                TurnInput(
                    session_id=f"c{2 * n // TURNS_PER_CONVERSATION}",
                    namespace="bench",
                    model=None,
                    user_text=sentence(rng, words),
                    assistant_text=sentence(rng, words),
                )
                for n in range(count // 2)
            ]
            began = time.perf_counter()
            written = 0
            for item in exchanges:
                written += (await ingest_turn(rt, item)).turns
            await book.flush()
            elapsed = time.perf_counter() - began
        finally:
            store.close()
    print(
        f"ingest: {written} turns through the write path (Markdown file + context-expanded "
        f"index, git coalesced): {written / elapsed:,.0f} turns/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=2_000, help="turns (0: skip)")
    args = parser.parse_args()
    if args.ingest:
        asyncio.run(ingest_bench(args.ingest))
    asyncio.run(search_bench(args.sizes, args.queries))


if __name__ == "__main__":
    main()
