"""Embedding throughput: sentences per second for the MiniLM (ONNX int8) and hashing embedders.

Run: .venv/bin/python benchmarks/embed_bench.py [--count 1000]

Sentences are synthetic chat-turn-like texts (8–40 words, fixed seed) so runs compare.
MiniLM's one-time load is reported apart from its throughput.
"""

from __future__ import annotations

import argparse
import random
import time

from memlane.text.embeddings import HashingEmbedder, MiniLMEmbedder

VOCABULARY = """the a my we you deploy service payment friday lisbon flight storm cancelled dog
puppy adopted birthday cake chocolate daughter invoice due tomorrow meeting notes database migration
failed retry config token window summary memory session proxy upstream model python function error
trace fixed test suite green red yesterday last week next month hiking mountains painting class
support group moved city job interview offer accepted"""
WORDS = VOCABULARY.split()


def sentences(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(8, 40))) + "." for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=1000, help="sentences per embedder")
    args = parser.parse_args()
    texts = sentences(args.count)

    minilm = MiniLMEmbedder()
    started = time.perf_counter()
    minilm.embed(["warm up"])
    load = time.perf_counter() - started
    print(f"minilm-l6-v2-int8  load (once per process): {load:.2f} s")

    for name, embedder in (("minilm-l6-v2-int8", minilm), ("hashing-256", HashingEmbedder())):
        started = time.perf_counter()
        vectors = embedder.embed(texts)
        elapsed = time.perf_counter() - started
        print(
            f"{name:18} {len(texts)} sentences in {elapsed:.2f} s: "
            f"{len(texts) / elapsed:,.0f} sentences/s ({vectors.shape[1]}-d)"
        )


if __name__ == "__main__":
    main()
