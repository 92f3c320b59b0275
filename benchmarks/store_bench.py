"""Store throughput and query latency, for whichever backend `open_store` picks.

Run: .venv/bin/python benchmarks/store_bench.py [--store-url URL] [--sizes 10000 100000]

Without --store-url the embedded SQLite file is used, in a temporary folder.
With --store-url postgresql://… the benchmark writes into that database under
session keys and memory scopes starting with `bench-<random>` and deletes them
afterwards.

Figures:
- single appends/s: one message per `append_messages` call, each its own durable
  transaction (what the proxy does for each turn);
- batched appends/s: 100 messages per call;
- keyword and vector query latency p50/p95 at each size, with a scope filter
  (one namespace of ten); the searched items are memory entries (facts, role
  "memory", what recall searches) with synthetic chat-like text (Zipf-distributed
  words plus identifiers) and a random 384-d unit vector; stored messages are not
  search documents, so they take no part in these figures;
- keyword latency again with 20 memory entries stored before each query, as a
  running proxy's memory writes land between its searches (the query's time only).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from memlane.config import Settings
from memlane.store import NewMessage, SearchFilter, Store, open_store
from memlane.types import Fact, Message

DIM = 384
MODEL = "bench-random-384"
NAMESPACES = 10
BATCH = 100
IDENTIFIERS = ["src/app/main.py", "parse_config_file", "loadUserProfile", "E1234", "v2.3.1"]


@dataclass
class Corpus:
    """Synthetic chat-like text: a Zipf vocabulary, so some words are common and most rare."""

    words: list[str]
    weights: list[float]
    rng: random.Random

    @classmethod
    def make(cls, seed: int = 7, size: int = 20_000) -> Corpus:
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size)]
        weights = [1.0 / (rank + 1) for rank in range(size)]
        return cls(words, weights, rng)

    def sentence(self) -> str:
        words = self.rng.choices(self.words, self.weights, k=self.rng.randint(8, 40))
        if self.rng.random() < 0.2:
            words.append(self.rng.choice(IDENTIFIERS))
        return " ".join(words)

    def query(self) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=self.rng.randint(2, 4)))


def percentile(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def timed(calls: int, work: Callable[[int], object]) -> list[float]:
    """Latency of each call in milliseconds."""
    out: list[float] = []
    for i in range(calls):
        started = time.perf_counter()
        work(i)
        out.append((time.perf_counter() - started) * 1000)
    return out


def rates(count: int, work: Callable[[], object]) -> tuple[float, float]:
    """Items per second of wall time, and per second of this process's CPU time.

    On a shared machine the second is the better estimate of an idle one; for a
    server backend it leaves out the server's own CPU.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return count / (time.perf_counter() - wall), count / (time.process_time() - cpu)


def unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def message(text: str) -> NewMessage:
    return NewMessage(Message(role="user", text=text, wire="chat"), token_count=len(text.split()))


def memory_entry(fact_id: str, scope: str, conversation_id: str, text: str) -> Fact:
    """A memory entry (an extracted fact) as the proxy's memory writes store it."""
    stamp = datetime.now(UTC)
    return Fact(
        id=fact_id,
        scope=scope,
        conversation_id=conversation_id,
        role="memory",
        text=text,
        created_at=stamp,
        updated_at=stamp,
        content_hash=f"h-{fact_id}",
    )


class Bench:
    def __init__(self, store: Store, queries: int) -> None:
        self.store = store
        self.queries = queries
        self.prefix = f"bench-{uuid.uuid4().hex[:8]}"
        self.corpus = Corpus.make()
        self.rng = np.random.default_rng(7)
        self.scopes = [f"{self.prefix}-ns{i}" for i in range(NAMESPACES)]
        self.sessions = [
            store.ensure_session(f"{self.prefix}-s{i}", namespace=scope).id
            for i, scope in enumerate(self.scopes)
        ]
        self.stored = 0
        self.fact_ids: list[str] = []

    def entries(self, namespace: int, count: int) -> list[Fact]:
        """`count` new memory entries in one namespace, each with a unique id."""
        out: list[Fact] = []
        for _ in range(count):
            fact_id = f"{self.prefix}-f{len(self.fact_ids)}"
            self.fact_ids.append(fact_id)
            out.append(
                memory_entry(
                    fact_id,
                    self.scopes[namespace],
                    self.sessions[namespace],
                    self.corpus.sentence(),
                )
            )
        return out

    def single_appends(self, count: int) -> tuple[float, float]:
        session = self.store.ensure_session(f"{self.prefix}-single").id
        texts = [self.corpus.sentence() for _ in range(count)]
        return rates(
            count, lambda: [self.store.append_messages(session, [message(t)]) for t in texts]
        )

    def batched_appends(self, count: int) -> tuple[float, float]:
        session = self.store.ensure_session(f"{self.prefix}-batched").id
        batches = [
            [message(self.corpus.sentence()) for _ in range(BATCH)] for _ in range(count // BATCH)
        ]
        return rates(
            len(batches) * BATCH, lambda: [self.store.append_messages(session, b) for b in batches]
        )

    def fill_to(self, size: int) -> None:
        """Add memory entries with vectors, round-robin over the namespaces, until `size` are
        stored."""
        while self.stored < size:
            namespace = (self.stored // BATCH) % NAMESPACES
            batch = self.entries(namespace, min(BATCH, size - self.stored))
            self.store.put_facts(batch)
            vectors = unit_vectors(self.rng, len(batch))
            self.store.put_vectors(
                "fact",
                [(f.id, v) for f, v in zip(batch, vectors, strict=True)],
                model=MODEL,
            )
            self.stored += len(batch)

    def query_latencies(self) -> tuple[list[float], list[float]]:
        filters = [SearchFilter(kinds=("fact",), scopes=(scope,)) for scope in self.scopes]
        texts = [self.corpus.query() for _ in range(self.queries)]
        vectors = unit_vectors(self.rng, self.queries)
        self.store.keyword_search(texts[0], filters[0])  # warm caches, as a running proxy would be
        self.store.vector_search(vectors[0], filters[0], model=MODEL)
        keyword = timed(
            self.queries,
            lambda i: self.store.keyword_search(texts[i], filters[i % NAMESPACES], limit=10),
        )
        vector = timed(
            self.queries,
            lambda i: self.store.vector_search(
                vectors[i], filters[i % NAMESPACES], model=MODEL, limit=10
            ),
        )
        return keyword, vector

    def query_latencies_with_writes(self, per_query: int = 20) -> list[float]:
        """Keyword queries with `per_query` new memory entries stored before each, as a
        running proxy's memory writes land between its searches: what the last writes added
        is searched before it is merged into the rest."""
        filters = [SearchFilter(kinds=("fact",), scopes=(scope,)) for scope in self.scopes]
        texts = [self.corpus.query() for _ in range(self.queries)]
        batches = [self.entries(i % NAMESPACES, per_query) for i in range(len(texts))]
        samples: list[float] = []
        for i, text in enumerate(texts):
            self.store.put_facts(batches[i])
            started = time.perf_counter()
            self.store.keyword_search(text, filters[i % NAMESPACES], limit=10)
            samples.append((time.perf_counter() - started) * 1000)
        self.stored += per_query * len(texts)
        return samples

    def cleanup(self) -> None:
        with self.store.transaction():
            for fact_id in self.fact_ids:
                self.store.purge_fact(fact_id)
        for session in self.store.list_sessions():
            if session.key.startswith(self.prefix):
                self.store.delete_session(session.id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store-url", default=None, help="postgresql://… (default: SQLite)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--single", type=int, default=3_000, help="single appends to time")
    parser.add_argument("--batched", type=int, default=30_000, help="batched appends to time")
    parser.add_argument("--queries", type=int, default=300, help="queries per size and kind")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="memlane-bench-") as home:
        settings = Settings(home=Path(home), store_url=args.store_url)
        store = open_store(settings)
        backend = type(store).__name__
        bench = Bench(store, args.queries)
        rows: list[tuple[str, str]] = []
        try:
            for name, (wall, cpu) in (
                ("single appends (1 per transaction)", bench.single_appends(args.single)),
                (f"batched appends ({BATCH} per call)", bench.batched_appends(args.batched)),
            ):
                rows.append((name, f"{wall:,.0f}/s ({cpu:,.0f} per CPU-second)"))
            for size in sorted(args.sizes):
                started = time.perf_counter()
                bench.fill_to(size)
                print(
                    f"filled to {size:,} items in {time.perf_counter() - started:.1f} s", flush=True
                )
                keyword, vector = bench.query_latencies()
                label = f"{size // 1000}k" if size % 1000 == 0 else str(size)
                rows.append(
                    (
                        f"keyword p50 / p95 @ {label}",
                        f"{percentile(keyword, 50):.1f} / {percentile(keyword, 95):.1f} ms",
                    )
                )
                rows.append(
                    (
                        f"vector p50 / p95 @ {label}",
                        f"{percentile(vector, 50):.1f} / {percentile(vector, 95):.1f} ms",
                    )
                )
                written = bench.query_latencies_with_writes()
                rows.append(
                    (
                        f"keyword p50 / p95 @ {label}, 20 memory entries written before each",
                        f"{percentile(written, 50):.1f} / {percentile(written, 95):.1f} ms",
                    )
                )
        finally:
            if args.store_url:
                bench.cleanup()
            store.close()

    print()
    print(f"| figure | {backend} |")
    print("| --- | ---: |")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
