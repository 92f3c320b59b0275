"""The web inspector's pages at scale: server time and weight of each main page.

Run: .venv/bin/python benchmarks/inspector_bench.py [--sessions 2000] [--memories 100000]
                                                    [--requests 30]

Fills an embedded (SQLite) home the way memlane would: `--sessions` sessions in
10 namespaces, each with a short agentic history (prompts, tool calls and
results, answers), turn records and a compaction now and then, plus one long
session of 2,000 messages; `--memories` memories written as Markdown files and
indexed by the memory book (the files are the truth, as in a real home), in 10
namespace scopes and `global`. Then memlane's app is served by uvicorn on
loopback and each page is requested `--requests` times with the admin token
(after one warm-up request): the time from request to the last byte, p50 and
p95, and the HTML's size (raw and gzip; the CSS and htmx are cached after the
first page). No LLM is called.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import random
import socket
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import uvicorn

from memlane.config import Settings
from memlane.engine import turnlog
from memlane.engine.governance.ledger import EVENT_COMPACTED, EVENT_DROPPED
from memlane.engine.memory.scopes import GLOBAL, namespace_scope
from memlane.engine.runtime import Runtime
from memlane.files.admin_token import ensure
from memlane.files.memory_files import MemoryFiles, new_id, render
from memlane.proxy.app import create_app
from memlane.store import NewMessage
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact, Message, ToolCall

NAMESPACES = 10
WORDS = (
    "config parser deploy staging database cache queue retry worker schema index migration "
    "token session memory window summary tool output loader build test release branch review"
).split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def history(rng: random.Random, steps: int) -> list[Message]:
    out = [Message(role="user", text=f"Please {sentence(rng, 8)}")]
    for step in range(steps):
        call = ToolCall(f"call_{step}", "run", f'{{"step": {step}}}')
        out.append(Message(role="assistant", kind="tool_call", tool_calls=(call,)))
        out.append(
            Message(role="tool", kind="tool_result", text=sentence(rng, 60), call_id=call.id)
        )
    out.append(Message(role="assistant", text=sentence(rng, 20)))
    return out


def fill_sessions(store: SQLiteStore, count: int, rng: random.Random) -> str:
    """`count` sessions of about 20 messages, and one of 2,000; returns the long one's id."""
    for i in range(count):
        session = store.ensure_session(f"session-{i}", namespace=f"repo{i % NAMESPACES}")
        messages = history(rng, 9)
        store.append_messages(session.id, [NewMessage(m, 40) for m in messages])
        store.update_session(
            session.id,
            title=messages[0].text[:80],
            metadata={"model": "gpt-4o", "client": "codex_cli_rs/0.169.0"},
        )
        store.add_usage(session.id, prompt_tokens=12_000, completion_tokens=900, cost_usd=0.03)
        for _ in range(5):
            payload = {"status": "ok", "model": "gpt-4o", "prompt_tokens": 2_400}
            store.add_event(session.id, turnlog.TURN_EVENT, payload)
        if i % 10 == 0:
            store.add_event(session.id, EVENT_DROPPED, {"index": 3}, text=sentence(rng))
            store.add_event(session.id, EVENT_COMPACTED, {"newly_dropped": 1, "snapshot": "s"})
        if (i + 1) % 200 == 0:
            print(f"  sessions {i + 1:,}/{count:,}", end="\r", flush=True)
    long = store.ensure_session("long-session", namespace="repo0")
    stored = 0
    while stored < 2_000:  # a turn record after each exchange, as the proxy leaves them
        messages = history(rng, 10)[: 2_000 - stored]
        store.append_messages(long.id, [NewMessage(m, 40) for m in messages])
        store.add_event(long.id, turnlog.TURN_EVENT, {"status": "ok", "model": "gpt-4o"})
        stored += len(messages)
    print(" " * 40, end="\r")
    return long.id


def write_memory_files(home: Path, count: int, rng: random.Random) -> None:
    """Markdown files as the memory book writes them (plain writes: this is a fill)."""
    files = MemoryFiles(home / "memory")
    start = datetime(2025, 1, 1, tzinfo=UTC)
    scopes = [GLOBAL, *(namespace_scope(f"repo{n}") for n in range(NAMESPACES))]
    for i in range(count):
        when = start + timedelta(minutes=i)
        fact = Fact(
            id=new_id(),
            scope=scopes[i % len(scopes)],
            conversation_id="bench",
            role="memory",
            text=sentence(rng),
            created_at=when,
            updated_at=when,
        )
        if i < len(scopes):
            files.write(fact)  # creates each scope's folder and marker
            continue
        path = files.path_for(fact)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(fact), encoding="utf-8")
        if (i + 1) % 10_000 == 0:
            print(f"  memory files {i + 1:,}/{count:,}", end="\r", flush=True)
    print(" " * 40, end="\r")


def serve(rt: Runtime) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(rt.settings, runtime=rt)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def measure(client: httpx.Client, url: str, requests: int) -> tuple[float, float, int, int]:
    first = client.get(url)
    first.raise_for_status()
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - began) * 1000)
        response.raise_for_status()
    body = first.content
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(times), p95, len(body), len(gzip.compress(body))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(7)
    home = Path(tempfile.mkdtemp(prefix="memlane-inspector-bench-"))
    settings = Settings(home=home, embedding_backend="hashing", memory_git=False)
    store = SQLiteStore(settings.database_path)
    began = time.perf_counter()
    long_id = fill_sessions(store, args.sessions, rng)
    write_memory_files(home, args.memories, rng)
    rt = Runtime(settings, store)
    asyncio.run(rt.memory_book.ready())  # index the files; the served app then has nothing to do
    fact_id = store.page_facts(limit=1)[0][0].id
    short = store.find_session("session-0")
    assert short is not None
    last_event = store.list_events(long_id, limit=1)[-1].id
    print(
        f"filled {args.sessions:,} sessions (+1 of 2,000 messages) and {args.memories:,} memories "
        f"in {time.perf_counter() - began:.0f} s"
    )
    token = ensure(home, None)
    server, thread, base = serve(rt)
    pages = [
        ("overview", "/ui"),
        ("sessions, page 1", "/ui/sessions"),
        ("sessions, page 40", "/ui/sessions?page=40"),
        ("sessions, search", "/ui/sessions?q=deploy+staging"),
        ("session, ~20 messages", f"/ui/sessions/{short.id}"),
        ("session, 2,000 messages (the last 100)", f"/ui/sessions/{long_id}"),
        (
            "session live poll, nothing new",
            f"/ui/sessions/{long_id}/live?after=1999&events_after={last_event}",
        ),
        ("memories, every scope", "/ui/memories"),
        ("memories, one scope, page 50", "/ui/memories?scope=ns:repo3&page=50"),
        ("memories, search", "/ui/memories?q=deploy+staging+database"),
        ("one memory", f"/ui/memories/{fact_id}"),
        ("activity", "/ui/activity"),
    ]
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"\nload average at start: {' '.join(load)} ({os.cpu_count()} cores)\n")
    print("| page | p50 ms | p95 ms | HTML KB | gzip KB |")
    print("| --- | --- | --- | --- | --- |")
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        for label, url in pages:
            p50, p95, size, zipped = measure(client, url, args.requests)
            print(f"| {label} | {p50:.1f} | {p95:.1f} | {size / 1024:.1f} | {zipped / 1024:.1f} |")
        css = len(client.get("/ui/static/style.css").content)
        js = len(client.get("/ui/static/htmx.min.js").content)
    print(f"\nstatic, cached after the first page: style.css {css / 1024:.1f} KB, ", end="")
    print(f"htmx {js / 1024:.1f} KB")
    server.should_exit = True
    thread.join(timeout=15)
    store.close()


if __name__ == "__main__":
    main()
