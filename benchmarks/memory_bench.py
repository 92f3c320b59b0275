"""Long-term memory: search latency by store size, and ingest throughput.

Run: .venv/bin/python benchmarks/memory_bench.py [--sizes 10000 100000 1000000]
                                                  [--ingest 1000] [--queries 200]

Search latency: the whole read-path `search` (keyword candidates, dense
candidates, fusion, recency, MMR, top 5) over an embedded SQLite store holding
N memories with synthetic text (Zipf-distributed words plus identifiers) and
**synthetic random 384-d unit vectors** (an embedder that hashes the text to a
random vector: latency does not depend on what the vectors mean; the real
query embedding costs ~5–20 ms on top, measured separately below). Memories are
spread over 10 namespaces (the most common word is in about a quarter
of them); each query searches one namespace plus `global`, as
a proxy request does, and a second set searches every scope (the worst case).
The first query after loading warms the store's keyword index and vector cache
(both in-process) and is not counted; its time is printed as "warm-up", and
"RSS" is this process's resident memory after the queries (the caches hold the
vectors as float32, about 1.5 KB per memory, and the keyword postings).

Ingest: memories written through the memory book one batch at a time —
Markdown file (atomic write) + index + embedding with the packaged MiniLM —
reported as memories per second.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import random
import resource
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memlane.config import Settings
from memlane.engine.memory.book import new_fact
from memlane.engine.memory.scopes import GLOBAL, namespace_scope
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.files.memory_files import new_id
from memlane.store.codec import fact_to_row
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact

DIM = 384
NAMESPACES = 10
LOAD_BATCH = 20_000
IDENTIFIERS = ["src/app/main.py", "parse_config_file", "loadUserProfile", "E1234", "v2.3.1"]


class RandomEmbedder:
    """Synthetic vectors: the text's hash seeds a random unit vector (no model)."""

    model_id = "bench-random-384"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.empty((len(texts), DIM), np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            row = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = row / np.linalg.norm(row)
        return out


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


def build(store: SQLiteStore, size: int, rng: random.Random, words: list[str]) -> None:
    """Load `size` memories and their vectors in big transactions."""
    embedder = RandomEmbedder()
    start = datetime(2025, 1, 1, tzinfo=UTC)
    done = 0
    while done < size:
        count = min(LOAD_BATCH, size - done)
        facts = []
        for i in range(count):
            when = start + timedelta(minutes=done + i)
            facts.append(
                Fact(
                    id=new_id(),
                    scope=namespace_scope(f"repo{rng.randrange(NAMESPACES)}"),
                    conversation_id=f"c{rng.randrange(size // 50 + 1)}",
                    role="memory",
                    text=sentence(rng, words),
                    created_at=when,
                    updated_at=when,
                )
            )
        store.load("facts", [fact_to_row(f) for f in facts])
        vectors = embedder.embed([f.text for f in facts])
        store.put_vectors(
            "fact", [(f.id, vectors[i]) for i, f in enumerate(facts)], model=embedder.model_id
        )
        done += count
        print(f"  loaded {done:,}/{size:,}", end="\r", flush=True)
    print(" " * 40, end="\r")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def latency(rt: Runtime, queries: list[str], scoped: bool) -> tuple[float, float]:
    times = []
    for i, query in enumerate(queries):
        scopes = [namespace_scope(f"repo{i % NAMESPACES}"), GLOBAL] if scoped else None
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
    print("search latency (ms), top 5, full read path, synthetic 384-d vectors")
    print(
        f"{'memories':>10} {'scoped p50':>11} {'scoped p95':>11} {'all p50':>9} {'all p95':>9}"
        f" {'warm-up s':>10} {'RSS MB':>8}"
    )
    for size in sizes:
        rng = random.Random(size)
        words = vocabulary(rng)
        with tempfile.TemporaryDirectory(prefix="memlane-bench-") as folder:
            home = Path(folder)
            store = SQLiteStore(home / "memlane.db")
            try:
                build(store, size, rng, words)
                rt = Runtime(Settings(home=home), store, _embedder=RandomEmbedder())
                asked = [" ".join(sentence(rng, words).split()[:6]) for _ in range(queries)]
                began = time.perf_counter()
                await search(rt, asked[0], scopes=None)  # warm the keyword and vector caches
                warm = time.perf_counter() - began
                s50, s95 = await latency(rt, asked, scoped=True)
                a50, a95 = await latency(rt, asked, scoped=False)
                print(
                    f"{size:>10,} {s50:>11.1f} {s95:>11.1f} {a50:>9.1f} {a95:>9.1f}"
                    f" {warm:>10.1f} {rss_mb():>8,.0f}",
                    flush=True,
                )
            finally:
                store.close()


async def ingest_bench(count: int, batch: int) -> None:
    from memlane.text.factory import make_embedder

    rng = random.Random(7)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="memlane-bench-") as folder:
        home = Path(folder)
        settings = Settings(home=home, memory_git=False)
        store = SQLiteStore(home / "memlane.db")
        try:
            rt = Runtime(settings, store, _embedder=make_embedder(settings))
            book = rt.memory_book
            texts = [sentence(rng, words) for _ in range(count)]
            rt.embedder.embed(["warm up"])
            began = time.perf_counter()
            for first in range(0, count, batch):
                facts = [
                    new_fact(
                        scope=GLOBAL,
                        conversation_id="bench",
                        role="memory",
                        text=t,
                        fact_id=new_id(),
                    )
                    for t in texts[first : first + batch]
                ]
                await book.write(puts=facts)
            elapsed = time.perf_counter() - began
            one = time.perf_counter()
            rt.embedder.embed(["what did I say about the config parser?"])
            query_ms = (time.perf_counter() - one) * 1000
        finally:
            store.close()
    print(
        f"ingest: {count} memories in batches of {batch} (file + index + MiniLM embedding): "
        f"{count / elapsed:,.0f} memories/s; one query embedding: {query_ms:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(ingest_bench(args.ingest, args.batch))
    asyncio.run(search_bench(args.sizes, args.queries))


if __name__ == "__main__":
    main()
