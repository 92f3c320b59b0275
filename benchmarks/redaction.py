"""Redaction: recall on secret spellings, false positives on look-alikes, cost per KB.

Run: .venv/bin/python benchmarks/redaction.py [--kb 256]

The corpus (`tests/text/data/redaction_corpus.json`) holds spellings that must be
redacted (each with the part that must not survive) and look-alikes that must stay
unchanged (commit hashes, UUIDs, paths, base64 of prose, `max_tokens: 4096`…). The cost
is measured on `--kb` KB of ordinary transcript text (prose, code, paths, hashes) with a
few secrets sprinkled in, after the detectors are loaded (the load is printed apart).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from memlane.text import secret_detectors
from memlane.text.redact import redact

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "text" / "data" / "redaction_corpus.json"

FILLER = (
    "The user asked to refactor the retrieval stage; we ran `pytest tests/engine -q` and\n"
    "commit 3f2a9c4b1d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a fixed the flaky test in\n"
    "/home/alice/projects/memlane/src/memlane/engine/retrieval/search.py (max_tokens: 4096).\n"
    "def search(query: str, limit: int = 10) -> list[Hit]:\n"
    "    return [hit for hit in fuse(keyword(query), dense(query)) if hit.score > 0.1]\n"
    "request_id=550e8400-e29b-41d4-a716-446655440000 took 12 ms; token_count=12.\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kb", type=int, default=256, help="KB of transcript to time")
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())

    started = time.perf_counter()
    secret_detectors.load()
    print(f"detect-secrets detectors loaded in {time.perf_counter() - started:.2f} s")

    secrets = corpus["secrets"]
    caught = [s for s in secrets if s["secret"] not in redact(s["text"])]
    looks = corpus["look_alikes"]
    changed = [t for t in looks if redact(t) != t]
    print(f"recall: {len(caught)}/{len(secrets)} = {len(caught) / len(secrets):.1%}")
    print(f"false positives: {len(changed)}/{len(looks)} = {len(changed) / len(looks):.1%}")
    for text in changed:
        print(f"  changed: {text!r}")

    sample = secrets[0]["text"] + "\n" + FILLER * (args.kb * 1024 // len(FILLER))
    size_kb = len(sample.encode()) / 1024
    redact(sample)
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        redact(sample)
        runs.append(time.perf_counter() - started)
    best = min(runs)
    print(f"cost: {best * 1e6 / size_kb:.0f} µs per KB (best of 5 over {size_kb:.0f} KB)")
    clean = FILLER * (args.kb * 1024 // len(FILLER))
    started = time.perf_counter()
    redact(clean)
    per_kb = (time.perf_counter() - started) * 1e6 / size_kb
    print(f"cost, no secret at all: {per_kb:.0f} µs per KB")


if __name__ == "__main__":
    main()
