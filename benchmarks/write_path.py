"""The write path: what the background work each turn causes costs, once it has all run.

Run: .venv/bin/python benchmarks/write_path.py [--sessions 24] [--turns 8] [--clients 4]
        [--variant defaults|quiet] [--set MEMLANE_NAME=value ...]

A scripted OpenAI-compatible upstream runs in this process (a thread); `memlane serve`
runs as its own process on loopback. `--clients` clients each hold sessions in turn,
a chat client's way: every request resends the conversation so far plus one new user
message (~40 words that state something about the user), non-streamed. The upstream
answers memlane's own calls as a model following their prompts would: one fact per
user message for extraction, ADD for every new fact in reconciliation, a short text
for summaries and a JSON object for session metadata.

Unlike `proxy_overhead.py`, which reads the proxy's CPU time around each batch of
requests, this waits until the proxy's background work has all run (the status
route's `background_pending` at 0, twice, past the coalesced git commit) before
reading the CPU time: work deferred and batched is counted, not hidden. Printed per
user turn: the proxy's CPU time (request path and background), memlane's own LLM
calls by kind, memory files written and git commits, and what back-pressure dropped.
`--variant quiet` (memory and session indexing off) gives the request path alone:
the difference is the background's cost per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scripted upstream lives in tests/support

from benchmarks.load import loadavg  # noqa: E402
from benchmarks.proxy_overhead import (  # noqa: E402
    ANSWER,
    HEADERS,
    VARIANTS,
    cpu_seconds,
    start_proxy,
)

TOPICS = ["Lisbon", "Rust", "cycling", "Postgres", "a cat named Miso", "jazz", "Kyoto", "chess"]
SETTLE_SECONDS = 7.0
"""Past the coalesced git commit's quiet period (`book.history.COMMIT_QUIET_SECONDS`)."""


def user_text(session: int, turn: int) -> str:
    topic = TOPICS[(session + turn) % len(TOPICS)]
    return (
        f"Session {session}, turn {turn}: by the way I care a lot about {topic}, and my "
        f"project number {session * 100 + turn} is due soon. Can you look at the failing "
        "test in src/app/main.py and tell me what the stack trace means for the parser?"
    )


def classify(system: str) -> str:
    from memlane.engine.memory.extract import FACT_PROMPT
    from memlane.engine.memory.reconcile import RECONCILE_PROMPT
    from memlane.engine.memory.summary import SUMMARY_PROMPT
    from memlane.engine.sessions.indexing import INDEX_PROMPT
    from memlane.engine.sessions.working import SUMMARY_PROMPT as SESSION_SUMMARY

    kinds = {
        FACT_PROMPT: "extract",
        RECONCILE_PROMPT: "reconcile",
        SUMMARY_PROMPT: "summary",
        INDEX_PROMPT: "index",
        SESSION_SUMMARY: "session-summary",
    }
    return kinds.get(system, "client")


def start_upstream(calls: Counter[str]) -> str:
    """The scripted upstream, answering memlane's own prompts; counts calls by kind."""
    from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream

    metadata = '{"name": "bench", "description": "A benchmark.", "summary": "Bench.", "tags": []}'

    def answer(request: RecordedRequest) -> Reply:
        messages = request.messages
        system = messages[0].get("content") if messages else None
        kind = classify(system) if isinstance(system, str) else "client"
        calls[kind] += 1
        body = str(messages[-1].get("content") or "") if messages else ""
        if kind == "extract":
            facts = [f"The user cares about {t}" for t in TOPICS if t in body]
            return Reply(text=json.dumps(facts))
        if kind == "reconcile":
            new = json.loads(body.split("NEW ", 1)[1]) if "NEW " in body else []
            return Reply(text=json.dumps([{"event": "ADD", "text": f} for f in new]))
        if kind == "index":
            return Reply(text=metadata)
        if kind in ("summary", "session-summary"):
            return Reply(text="The user cares about several things.")
        return Reply(text=ANSWER, chunk_size=12)

    upstream = ScriptedUpstream()
    upstream.start()
    upstream.respond_with(answer)
    return upstream.url


async def drive(url: str, sessions: int, turns: int, clients: int, run: str) -> int:
    """Every session's turns, `clients` sessions at a time; returns the requests sent."""
    sent = 0
    queue = iter(range(sessions))

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal sent
        for s in queue:
            tag = f"{run}-{s}"
            messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief."}]
            for t in range(turns):
                messages.append({"role": "user", "content": user_text(s, t)})
                body = {"model": "bench", "messages": messages, "stream": False}
                headers = {**HEADERS, "x-memlane-session": tag}
                response = await client.post(f"{url}/chat/completions", json=body, headers=headers)
                response.raise_for_status()
                sent += 1
                messages.append({"role": "assistant", "content": ANSWER})

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return sent


def status(url: str, home: Path) -> dict[str, object]:
    from memlane.files import admin_token

    headers = {"authorization": f"Bearer {admin_token.read(home)}"}
    data: dict[str, object] = httpx.get(f"{url}/memlane/status", headers=headers, timeout=60).json()
    return data


def settle(url: str, home: Path) -> dict[str, object]:
    """Wait until no background work is left (seen twice, a commit's quiet period apart)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        first = status(url, home)
        if first["background_pending"] == 0:
            time.sleep(SETTLE_SECONDS)
            second = status(url, home)
            if second["background_pending"] == 0:
                return second
        time.sleep(0.5)
    raise SystemExit("the background never drained")


def count_files(home: Path) -> int:
    entries = home / "memory" / "entries"
    return sum(1 for _ in entries.rglob("*.md")) if entries.is_dir() else 0


def commits(home: Path) -> int:
    repo = home / "memory"
    if not (repo / ".git").exists():
        return 0
    out = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=repo, capture_output=True, text=True
    )
    return int(out.stdout.strip() or 0) if out.returncode == 0 else 0


def measure(args: argparse.Namespace, variant: str, upstream: str, calls: Counter[str]) -> str:
    calls.clear()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        extra = dict(item.split("=", 1) for item in args.set)
        proxy, url = start_proxy(upstream, home, variant=variant, extra=extra)
        try:
            base = url.removesuffix("/v1")
            httpx.get(f"{base}/health")
            before = cpu_seconds(proxy.pid) or 0.0
            started = time.perf_counter()
            sent = asyncio.run(drive(url, args.sessions, args.turns, args.clients, variant))
            wall = time.perf_counter() - started
            final = settle(url, home)
            cpu = (cpu_seconds(proxy.pid) or 0.0) - before
            files, history = count_files(home), commits(home)
        finally:
            proxy.terminate()
            proxy.wait(60)
    own = {k: v for k, v in calls.items() if k != "client"}
    per_kind = ", ".join(f"{k} {v / sent:.2f}" for k, v in sorted(own.items())) or "none"
    return (
        f"| {variant} | {sent} | {wall / sent * 1000:.1f} | {cpu / sent * 1000:.1f} "
        f"| {sum(own.values()) / sent:.2f} | {per_kind} | {files / sent:.2f} "
        f"| {history} | {final['background_dropped']} |"
    )


HEADER = (
    "| variant | user turns | wall ms/turn | proxy CPU ms/turn (drained) | own LLM calls/turn "
    "| by kind (per turn) | memory files/turn | git commits | dropped |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--turns", type=int, default=8, help="user turns per session")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--variant", choices=sorted(VARIANTS), action="append", help="default: defaults, quiet"
    )
    parser.add_argument("--set", action="append", default=[], metavar="MEMLANE_NAME=value")
    args = parser.parse_args()
    calls: Counter[str] = Counter()
    upstream = start_upstream(calls)
    print(f"load average before: {loadavg()}", flush=True)
    print(HEADER, flush=True)
    for variant in args.variant or ["defaults", "quiet"]:
        print(measure(args, variant, upstream, calls), flush=True)
    print(f"\nload average after: {loadavg()}; {os.cpu_count()} CPUs")
    print(
        f"{args.sessions} sessions of {args.turns} user turns, {args.clients} at a time; "
        "CPU read once the background has drained"
    )


if __name__ == "__main__":
    main()
