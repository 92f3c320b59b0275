"""A long agentic session replayed through memlane's proxy: does governance keep it in budget?

Run: .venv/bin/python benchmarks/long_session.py [--turns 320] [--seed 7]

A scripted client (Chat Completions, full history resent every request) works
through a session of `--turns` requests: tool calls whose outputs are 2–50 KB
of log-like text, a user message every few steps, and three facts planted
early (a file path, a decision, a user preference) that questions near the end
ask about. Every request goes through a real memlane proxy on loopback to a
scripted upstream that records what it receives. The run is made twice:

- the summariser answers (an extractive stand-in that keeps decisions, paths
  and preferences, as the summary prompt asks a real model to);
- the summariser always fails (HTTP 500): only the tail, the scaffold and the
  re-injected snippets of dropped history can carry the facts.

Printed per run: tokens forwarded per request against the full history (max,
p50), governance time per request (p50 / p95, LLM calls excluded, measured
inside the proxy), summariser calls and compactions, the cache-prefix share
(bytes of each forwarded request that repeat the previous forwarded request,
p50) and the retention rate (planted facts present in the request that asks
for them). Memory and session indexing are switched off so that only
governance shapes the requests.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.upstream import (  # noqa: E402
    Fail,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    start_proxy,
)

from memlane.config import Settings  # noqa: E402
from memlane.engine.governance.budget import Budget, context_window  # noqa: E402
from memlane.text.factory import make_tokenizer  # noqa: E402

MODEL = "gpt-4o"

FACTS = [
    # (turn planted, role, text, question asked near the end, what must be present)
    (
        6,
        "user",
        "Remember this path: the payment retry logic lives in services/billing/retry_policy.py.",
        "Which file holds the payment retry logic again?",
        "services/billing/retry_policy.py",
    ),
    (
        11,
        "assistant",
        "Decision: the job queue will use PostgreSQL advisory locks instead of Redis, because "
        "we already run PostgreSQL and want one less service.",
        "What locking did we decide on for the job queue?",
        "advisory locks",
    ),
    (
        16,
        "user",
        "My preference for all code in this repo: indent with tabs and use British spelling.",
        "Remind me of my indentation preference for the code in this repo.",
        "indent with tabs",
    ),
]

LOG_WORDS = (
    "INFO",
    "DEBUG",
    "WARN",
    "worker",
    "scheduler",
    "batch",
    "processed",
    "queued",
    "retried",
    "flushed",
    "cache",
    "hit",
    "miss",
    "request",
    "handler",
    "latency",
    "ms",
    "bytes",
    "connection",
    "pool",
    "acquired",
    "released",
    "shard",
    "replica",
    "compaction",
    "segment",
    "index",
    "build",
    "step",
    "module",
    "test",
    "passed",
    "skipped",
    "fixture",
    "import",
)


def tool_output(rng: random.Random, size: int) -> str:
    lines = []
    total = 0
    while total < size:
        words = " ".join(rng.choices(LOG_WORDS, k=rng.randint(6, 12)))
        stamp = f"2026-11-21T10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        line = f"{stamp} {words} id={rng.randint(1000, 99999)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def output_size(rng: random.Random) -> int:
    """2–50 KB, log-uniform (most outputs are small, a few are large)."""
    return int(2_000 * (25 ** rng.random()))


def build_turns(count: int, seed: int) -> list[list[dict[str, Any]]]:
    """What the client appends before each request (one list of messages per request)."""
    rng = random.Random(seed)
    planted = {turn: (role, text) for turn, role, text, _, _ in FACTS}
    questions = {count - 3 * (len(FACTS) - i): q for i, (_, _, _, q, _) in enumerate(FACTS)}
    turns: list[list[dict[str, Any]]] = [
        [
            {"role": "system", "content": "You are a coding agent working in a repository."},
            {"role": "user", "content": "Let's modernise the billing service step by step."},
            {"role": "assistant", "content": "Sure. I will start by reading the code."},
        ]
    ]
    for turn in range(1, count):
        items: list[dict[str, Any]] = []
        if turn in planted:
            role, text = planted[turn]
            items.append({"role": role, "content": text})
        if turn in questions:
            items.append({"role": "user", "content": questions[turn]})
        elif turn % 7 == 0:
            items.append({"role": "user", "content": f"Continue with step {turn} of the plan."})
        if turn % 5 == 0 and not items:
            items.append({"role": "assistant", "content": f"Step {turn} done; moving on."})
        call_id = f"call_{turn}"
        tool = rng.choice(["run_tests", "read_file", "grep", "shell"])
        items.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"step": turn})},
                    }
                ],
            }
        )
        items.append(
            {"role": "tool", "tool_call_id": call_id, "content": tool_output(rng, output_size(rng))}
        )
        turns.append(items)
    return turns


KEEP = re.compile(r"(Decision:|[Rr]emember|[Pp]reference|\w+/\w+\.\w+)")


def extractive_summary(request: RecordedRequest) -> Reply | None:
    """A stand-in summariser: keeps the lines a good model keeps (decisions, paths, preferences)."""
    body = request.json or {}
    messages = body.get("messages") or []
    prompt = str((messages[-1] if messages else {}).get("content") or "")
    if "<removed_messages>" not in prompt:
        return None
    previous = prompt.split("<previous_snapshot>")[1].split("</previous_snapshot>")[0].strip()
    removed = prompt.split("<removed_messages>")[1].split("</removed_messages>")[0]
    kept = [line for line in removed.splitlines() if KEEP.search(line) and "returned:" not in line]
    lines = [] if previous in ("", "(none)") else previous.splitlines()
    lines += [line[:300] for line in kept]
    return Reply(text="<state_snapshot>\n" + "\n".join(lines[-40:]) + "\n</state_snapshot>")


def failing_summary(request: RecordedRequest) -> Reply | Fail | None:
    if extractive_summary(request) is None:
        return None
    return Fail(500, "summariser down")


@dataclass
class Collected(logging.Handler):
    seconds: list[float] = field(default_factory=list)
    compactions: int = 0
    summariser_calls: int = 0

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        stats = getattr(record, "governance", None)
        if stats is None:
            return
        self.seconds.append(float(getattr(record, "governance_seconds", 0.0)))
        self.compactions += int(stats.compacted)
        self.summariser_calls += stats.summariser_calls

    def __hash__(self) -> int:
        return id(self)


def common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    low, high = 0, size
    while low < high:  # binary search on equal prefixes: fast on multi-MB bodies
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run(turns: list[list[dict[str, Any]]], *, summariser_works: bool) -> dict[str, Any]:
    upstream = ScriptedUpstream()
    upstream.start()
    home = Path(tempfile.mkdtemp(prefix="memlane-bench-"))
    settings = Settings(
        home=home,
        upstream_url=upstream.url,
        client_scope="all",
        memory_enabled=False,
        index_enabled=False,
        embedding_backend="hashing",
        max_body_bytes=256 * 1024 * 1024,
    )
    proxy = start_proxy(settings)
    handler = Collected()
    logger = logging.getLogger("memlane.governance")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    upstream.respond_with(extractive_summary if summariser_works else failing_summary)
    tokenizer = make_tokenizer(settings, MODEL)
    budget = Budget.of(settings, context_window(settings, None, MODEL))
    history: list[dict[str, Any]] = []
    history_tokens = 0
    forwarded_tokens: list[int] = []
    full_tokens: list[int] = []
    shares: list[float] = []
    previous: bytes | None = None
    over_budget = 0
    retained = 0
    questions = {q: needle for _, _, _, q, needle in FACTS}
    started = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for items in turns:
            history.extend(items)
            history_tokens += sum(tokenizer.count(str(m.get("content") or "")) + 4 for m in items)
            before = len(upstream.model_requests)
            response = client.post(
                f"{proxy.url}/chat/completions",
                json={"model": MODEL, "messages": history},
                headers={"x-memlane-session": "bench"},
            )
            if response.status_code != 200:
                raise SystemExit(f"request failed: {response.status_code} {response.text[:300]}")
            sent = [r for r in upstream.model_requests[before:] if extractive_summary(r) is None][
                -1
            ]
            messages = sent.json["messages"]
            tokens = sum(tokenizer.count(str(m.get("content") or "")) + 4 for m in messages)
            forwarded_tokens.append(tokens)
            full_tokens.append(history_tokens)
            over_budget += tokens > budget.limit
            body = json.dumps(messages, sort_keys=True).encode()
            if previous is not None:
                shares.append(common_prefix(previous, body) / len(body))
            previous = body
            last_user = next((m["content"] for m in reversed(items) if m["role"] == "user"), None)
            if last_user in questions and questions[last_user].encode() in body:
                retained += 1
    elapsed = time.perf_counter() - started
    proxy.stop()
    upstream.stop()
    logger.removeHandler(handler)
    return {
        "requests": len(turns),
        "window": budget.window.tokens,
        "limit": budget.limit,
        "over_budget": over_budget,
        "forwarded_max": max(forwarded_tokens),
        "forwarded_p50": statistics.median(forwarded_tokens),
        "full_max": max(full_tokens),
        "full_p50": statistics.median(full_tokens),
        "gov_p50_ms": percentile(handler.seconds, 0.5) * 1000,
        "gov_p95_ms": percentile(handler.seconds, 0.95) * 1000,
        "compactions": handler.compactions,
        "summariser_calls": handler.summariser_calls,
        "prefix_p50": statistics.median(shares),
        "retention": retained / len(FACTS),
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=320, help="requests in the session (≥ 300)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    turns = build_turns(args.turns, args.seed)
    for works in (True, False):
        result = run(turns, summariser_works=works)
        label = "summariser answers" if works else "summariser always fails"
        print(f"## {label}")
        print(
            f"requests {result['requests']}, model {MODEL} (window {result['window']}, "
            f"limit {result['limit']}), requests over budget: {result['over_budget']}"
        )
        print(
            f"tokens forwarded: max {result['forwarded_max']:,}, p50 {result['forwarded_p50']:,.0f}"
            f"  | full history: max {result['full_max']:,}, p50 {result['full_p50']:,.0f}"
        )
        print(
            f"governance time per request (LLM excluded): p50 {result['gov_p50_ms']:.1f} ms, "
            f"p95 {result['gov_p95_ms']:.1f} ms"
        )
        print(f"compactions {result['compactions']}, summariser calls {result['summariser_calls']}")
        print(
            f"cache-prefix share p50 {result['prefix_p50']:.1%}, retention "
            f"{result['retention']:.0%} of {len(FACTS)} planted facts, "
            f"wall time {result['seconds']:.0f} s"
        )


if __name__ == "__main__":
    main()
