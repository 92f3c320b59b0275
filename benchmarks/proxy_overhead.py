"""What memlane's proxy adds to a request: direct to the upstream vs through memlane, side by side.

Run: .venv/bin/python benchmarks/proxy_overhead.py [--requests 300] [--upstream-ms 300]
        [--variant defaults|turns-off|memory-off|quiet] [--clients 1 --clients 32]
        [--messages 20] [--set MEMLANE_NAME=value ...] [--no-engine | --floor]

Scripted upstreams (OpenAI-compatible and Anthropic-compatible) and one memlane
proxy (`memlane serve`) run as their own processes on loopback; this process is
the client. Each request is a 20-message conversation from an agentic client (an
`X-Memlane-Todo`), each in a fresh session, so every request stores 20 messages,
injects the state block and stores the answer: Chat Completions with Codex's
User-Agent, and (`messages` rows) Anthropic Messages with Claude Code's headers
(`--wire chat` or `--wire messages` runs one of the two).
Reported: p50/p99 latency of non-streamed requests and time to first byte of
streamed ones, at 1 and 32 concurrent clients, direct and through memlane:
for a new session (all 20 messages are new and stored), and for the next turn
of a session that already holds the first 18 (the common case of a client
resending its history; the priming request is not timed), and for a history that
grows each turn (each client keeps one session, resending it with the answer and a
new question each time, from 3 messages up to `--messages`, then a new one; every
request timed). `--messages 200` makes each conversation that long: what a long agent
session pays on every request for the history it resends.

`--variant defaults` (the default) runs memlane exactly as a new user gets it:
memory on (turns stored, facts extracted by the upstream, recall), session
indexing on, the default embedder setting, git versioning. Its background LLM
calls go to the same scripted upstream, as they would to a real one.
`memory-off` sets `MEMLANE_MEMORY_ENABLED=false`; `quiet` also turns off session
indexing (the engine's request path only). `--no-engine` serves memlane's HTTP face with
the engine's stages as no-ops; `--floor` puts a relay with no memlane code in its place
(uvicorn, the body read whole, one aiohttp call, the answer relayed as it comes): what
one more HTTP hop in Python costs on this machine, under every figure memlane gets.
`--upstream-ms` makes the upstream wait that long before answering, as a real model does.

Direct and memlane requests alternate in rounds within each cell, so both see
the same load from whatever else runs on the machine. The last column is the
proxy process's CPU time per request it served (priming and warm-up requests
included), read from /proc once the background work those requests caused has
all run (the status route's `background_pending` at 0: batched work is counted,
not left to the next round): it depends far less on the machine's load than
latency does.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scripted upstream lives in tests/support

WORDS = [
    "the",
    "proxy",
    "stores",
    "every",
    "turn",
    "and",
    "keeps",
    "requests",
    "inside",
    "the",
    "window",
    "of",
    "the",
    "model",
]
ANSWER = " ".join(WORDS * 6)
HEADERS = {
    "authorization": "Bearer sk-bench",
    "user-agent": "codex_cli_rs/0.169.0 (bench)",
    "x-memlane-todo": "1. measure\\n2. report",
}
CLAUDE_HEADERS = {
    "x-api-key": "sk-ant-bench",
    "anthropic-version": "2023-06-01",
    "user-agent": "claude-cli/2.1.330 (external, sdk-cli)",
    "x-memlane-todo": "1. measure\\n2. report",
}


MESSAGES = 20
"""Messages per benchmark conversation, unless `--messages` says otherwise."""


def conversation(tag: str, length: int = MESSAGES) -> list[dict[str, str]]:
    """`length` messages: a system prompt, then alternating user/assistant turns of ~60 words."""
    messages = [{"role": "system", "content": "You are a careful coding agent. " * 8}]
    for i in range(length - 1):
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(60))
        messages.append({"role": role, "content": f"{tag} turn {i}: {text}"})
    return messages


@dataclass(frozen=True)
class Wire:
    """How one wire format's benchmark request is sent."""

    name: str
    path: str
    headers: dict[str, str]
    session_header: str

    def body(self, messages: list[dict[str, str]], *, stream: bool) -> dict[str, object]:
        if self.name == "chat":
            return {"model": "bench", "messages": messages, "stream": stream}
        system, rest = messages[0]["content"], messages[1:]
        return {
            "model": "claude-bench",
            "max_tokens": 1024,
            "system": system,
            "messages": rest,
            "stream": stream,
        }


WIRES = {
    "chat": Wire("chat", "/chat/completions", HEADERS, "x-memlane-session"),
    "messages": Wire("messages", "/messages", CLAUDE_HEADERS, "x-claude-code-session-id"),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_upstream(ready: multiprocessing.Queue[str], latency: float = 0.0) -> None:
    """A model that answers the conversation with ANSWER and memlane's own prompts as a
    model following them would (valid JSON), each after `latency` seconds; one server
    speaks OpenAI's formats, the other Anthropic's."""
    from tests.support.anthropic_upstream import ScriptedAnthropic
    from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream

    from memlane.engine.memory.extract import FACT_PROMPT
    from memlane.engine.sessions.indexing import INDEX_PROMPT

    metadata = '{"name": "bench", "description": "A benchmark.", "summary": "Bench.", "tags": []}'
    own = {FACT_PROMPT: "[]", INDEX_PROMPT: metadata}

    def answer(request: RecordedRequest) -> Reply:
        system = request.messages[0].get("content") if request.messages else None
        text = own.get(system, ANSWER) if isinstance(system, str) else ANSWER
        return Reply(text=text, chunk_size=12, latency=latency)

    upstream = ScriptedUpstream()
    upstream.start()
    upstream.respond_with(answer)
    claude = ScriptedAnthropic()
    claude.start()
    claude.respond_with(answer)
    ready.put(upstream.url)
    ready.put(claude.url)
    gc.freeze()  # its start-up heap: a full collection would stall direct and memlane alike
    while True:  # what the servers record, no one reads here: kept, it would grow the heap
        time.sleep(RECORDED_SECONDS)
        upstream.requests.clear()
        claude.requests.clear()


RECORDED_SECONDS = 1.0


Process = subprocess.Popen[bytes]


def serve_without_engine(upstream_url: str, anthropic_url: str, home: str, port: int) -> None:
    """The proxy with the engine's stages as no-ops: what the HTTP face alone costs."""
    import uvicorn

    from memlane.config import Settings
    from memlane.engine import pipeline
    from memlane.engine.turn import Answer, Forward, Turn
    from memlane.proxy.app import create_app

    async def prepare(rt: object, turn: Turn) -> Forward:
        return Forward(turn.messages)

    async def finish(rt: object, turn: Turn, answer: Answer) -> None:
        return None

    pipeline.prepare, pipeline.finish = prepare, finish  # type: ignore[assignment]
    settings = Settings(
        home=Path(home),
        upstream_url=upstream_url,
        anthropic_upstream_url=anthropic_url.removesuffix("/v1"),
        embedding_backend="hashing",
    )
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")


def serve_floor(upstream_url: str, anthropic_url: str, home: str, port: int) -> None:
    """A relay with no memlane code at all: uvicorn, the body read whole, one aiohttp call,
    the answer relayed chunk by chunk as it comes. What one more HTTP hop in Python costs
    on this machine: the floor under memlane's own figures."""
    import aiohttp
    import uvicorn

    session: aiohttp.ClientSession | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal session
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                session = aiohttp.ClientSession()
                await send({"type": "lifespan.startup.complete"})
            assert session is not None
            await session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] == "/health":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"].removeprefix("/v1")
        base = anthropic_url if path.startswith("/messages") else upstream_url
        assert session is not None
        sent = {"content-type": "application/json"}
        async with session.post(base + path, data=body, headers=sent) as answer:
            kind = answer.headers.get("content-type", "application/json").encode()
            start = {"type": "http.response.start", "status": answer.status}
            await send({**start, "headers": [(b"content-type", kind)]})
            async for chunk in answer.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start_bare_proxy(
    upstream_url: str, anthropic_url: str, home: Path, *, floor: bool = False
) -> tuple[multiprocessing.Process, str]:
    port = free_port()
    process = multiprocessing.Process(
        target=serve_floor if floor else serve_without_engine,
        args=(upstream_url, anthropic_url, str(home), port),
        daemon=True,
    )
    process.start()
    return process, wait_healthy(f"http://127.0.0.1:{port}", process.kill)


def wait_healthy(base: str, kill: Callable[[], None]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health").status_code == 200:
                return f"{base}/v1"
        except httpx.HTTPError:
            time.sleep(0.1)
    kill()
    raise SystemExit("memlane did not start")


VARIANTS: dict[str, dict[str, str]] = {
    "defaults": {},
    # memory on (facts, recall, summaries), but no turn kept as an entry of its own: what
    # remembering every turn (two Markdown files, their index rows, a bigger search) costs
    "turns-off": {"MEMLANE_MEMORY_STORE_TURNS": "false"},
    "memory-off": {"MEMLANE_MEMORY_ENABLED": "false"},
    "quiet": {"MEMLANE_MEMORY_ENABLED": "false", "MEMLANE_INDEX_ENABLED": "false"},
}


def start_proxy(
    upstream_url: str,
    home: Path,
    *,
    variant: str,
    extra: dict[str, str] | None = None,
    serve_args: tuple[str, ...] = (),
) -> tuple[Process, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))}
    # the log level as shipped (info: an access line per request), as a new user runs it
    env |= {**VARIANTS[variant], **(extra or {})}
    command = [
        str(ROOT / ".venv/bin/memlane"),
        "--home",
        str(home),
        "serve",
        "--port",
        str(port),
        "--upstream",
        upstream_url,
        *serve_args,
    ]
    process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    return process, wait_healthy(f"http://127.0.0.1:{port}", process.kill)


@dataclass
class Result:
    latencies: list[float]
    first_bytes: list[float]


async def one_request(
    client: httpx.AsyncClient,
    url: str,
    tag: str,
    *,
    stream: bool,
    primed: bool,
    wire: Wire,
    length: int = MESSAGES,
    grown: Growing | None = None,
) -> float:
    """One timed request; `primed`: the session already holds all but the last 2 messages;
    `grown`: the next turn of a session that grows by an answer and a question each time."""
    messages = conversation(tag, length)
    headers = {**wire.headers, wire.session_header: tag}
    endpoint = url + wire.path
    if grown is not None:
        messages, headers = grown.next_turn(tag), {**wire.headers, wire.session_header: grown.key}
    elif primed:
        earlier = wire.body(messages[:-2], stream=False)
        (await client.post(endpoint, json=earlier, headers=headers)).raise_for_status()
        answer = {"role": "assistant", "content": ANSWER}
        messages = [*messages[:-2], answer, {"role": "user", "content": f"{tag}: and now?"}]
    body = wire.body(messages, stream=stream)
    started = time.perf_counter()
    if not stream:
        response = await client.post(endpoint, json=body, headers=headers)
        response.raise_for_status()
        return time.perf_counter() - started
    async with client.stream("POST", endpoint, json=body, headers=headers) as r:
        r.raise_for_status()
        first = None
        async for _ in r.aiter_raw():
            if first is None:
                first = time.perf_counter() - started
        assert first is not None
        return first


class Growing:
    """One client's session whose history grows each turn: the answer, then a new question,
    as an agent resends it; a new session once it holds `length` messages."""

    def __init__(self, length: int = MESSAGES) -> None:
        self.length = length
        self.key = ""
        self.messages: list[dict[str, str]] = []

    def next_turn(self, tag: str) -> list[dict[str, str]]:
        if not self.messages or len(self.messages) + 2 > self.length:
            self.key = f"grow-{tag}"
            self.messages = conversation(self.key, 3)
        else:
            self.messages += [
                {"role": "assistant", "content": ANSWER},
                {"role": "user", "content": f"{tag}: and then?"},
            ]
        return list(self.messages)


SETTLE_SECONDS = 1.0
"""Quiet after the warm-up requests: what they started once (the first memory write, a
put-off answer stored at the end of its grace, their background work) is over before
the timed requests begin, not inside the first of them."""

ERRORS: list[str] = []
"""Failed requests (status and body), counted per cell and printed: a failure is a
finding, not a reason to stop measuring."""


async def load(
    url: str,
    *,
    clients: int,
    total: int,
    stream: bool,
    primed: bool,
    run: str,
    wire: Wire,
    length: int = MESSAGES,
    growing: bool = False,
) -> list[float]:
    samples: list[float] = []
    sessions = [Growing(length) if growing else None for _ in range(clients)]
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        for i in range(min(clients, 8)):  # warm the connections and both servers
            await one_request(
                client,
                url,
                f"warm-{run}-{i}",
                stream=stream,
                primed=primed,
                wire=wire,
                length=length,
                grown=sessions[i] if growing else None,
            )
        await asyncio.sleep(SETTLE_SECONDS)
        counter = iter(range(total))

        async def worker(n: int) -> None:
            for i in counter:
                tag = f"{run}-{n}-{i}"
                try:
                    samples.append(
                        await one_request(
                            client,
                            url,
                            tag,
                            stream=stream,
                            primed=primed,
                            wire=wire,
                            length=length,
                            grown=sessions[n],
                        )
                    )
                except httpx.HTTPStatusError as exc:
                    body = exc.response.text if not exc.response.is_stream_consumed else ""
                    ERRORS.append(f"{exc.response.status_code} {body[:300]}")

        await asyncio.gather(*(worker(n) for n in range(clients)))
    return samples


def wait_for_background(proxy_url: str, home: Path, limit: float = 120.0) -> None:
    """Return once the proxy has no background work left (none in flight, no turn waiting
    in a batch), or after `limit` seconds."""
    from memlane.files import admin_token

    headers = {"authorization": f"Bearer {admin_token.read(home)}"}
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            status = httpx.get(f"{proxy_url}/memlane/status", headers=headers, timeout=30).json()
        except (httpx.HTTPError, ValueError):
            return
        if status.get("background_pending", 0) == 0:
            return
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux), or None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300, help="requests per measurement")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="defaults")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMLANE_NAME=value",
        help="one more setting for the proxy (repeatable): what a single knob costs",
    )
    parser.add_argument(
        "--upstream-ms", type=float, default=0.0, help="the upstream's time before answering"
    )
    parser.add_argument(
        "--clients", type=int, action="append", help="concurrent clients (repeatable; 1 and 32)"
    )
    parser.add_argument(
        "--wire",
        choices=sorted(WIRES),
        action="append",
        help="wire formats to measure (repeatable; default: chat and messages)",
    )
    parser.add_argument(
        "--messages",
        type=int,
        default=MESSAGES,
        help="messages per conversation (a long agent session: 200)",
    )
    parser.add_argument(
        "--no-engine",
        action="store_true",
        help="replace the engine's stages by no-ops: the HTTP face's own overhead",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="a relay with no memlane code (uvicorn and aiohttp): one HTTP hop's own cost",
    )
    args = parser.parse_args()

    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream_process = multiprocessing.Process(
        target=run_upstream, args=(ready, args.upstream_ms / 1000), daemon=True
    )
    upstream_process.start()
    upstream_url = ready.get(timeout=60)
    anthropic_url = ready.get(timeout=60)
    direct = {"chat": upstream_url, "messages": anthropic_url}
    wires = [WIRES[name] for name in args.wire or ("chat", "messages")]
    with tempfile.TemporaryDirectory() as home:
        proxy_process: Process | multiprocessing.Process
        if args.no_engine or args.floor:
            proxy_process, proxy_url = start_bare_proxy(
                upstream_url, anthropic_url, Path(home), floor=args.floor
            )
        else:
            extra = dict(item.split("=", 1) for item in args.set)
            anthropic = ("--anthropic-upstream", anthropic_url.removesuffix("/v1"))
            proxy_process, proxy_url = start_proxy(
                upstream_url,
                Path(home),
                variant=args.variant,
                extra=extra,
                serve_args=anthropic,
            )
        try:
            pid = proxy_process.pid
            assert pid is not None
            settled = functools.partial(wait_for_background, proxy_url, Path(home))
            rows = measure(
                direct,
                proxy_url,
                args.requests,
                pid,
                args.clients or [1, 32],
                wires,
                settled,
                length=args.messages,
            )
        finally:
            proxy_process.terminate()
            upstream_process.terminate()
            # its shutdown still flushes into the home: wait before the home goes
            if isinstance(proxy_process, multiprocessing.Process):
                proxy_process.join(30)
            else:
                proxy_process.wait(30)
    mode = f"variant {args.variant}, upstream answering after {args.upstream_ms:g} ms"
    if args.set:
        mode += f", with {' '.join(args.set)}"
    if args.no_engine:
        mode = "engine stages replaced by no-ops (the HTTP face alone)"
    if args.floor:
        mode = "a relay with no memlane code (uvicorn and one aiohttp call: the floor)"
    print(f"\n{args.messages}-message requests, {args.requests} per cell, {mode}; milliseconds\n")
    print(HEADER)
    for row in rows:
        print(row)


HEADER = (
    "| measure | clients | direct p50 | memlane p50 | +p50 | direct p99 | memlane p99 | +p99 "
    "| memlane CPU/request | failed |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)
ROUNDS = 4
"""Direct and memlane take turns this many times per cell."""


def measure(
    direct_urls: dict[str, str],
    proxy_url: str,
    total: int,
    proxy_pid: int,
    client_counts: list[int],
    wires: list[Wire],
    settled: Callable[[], None] = lambda: None,
    *,
    length: int = MESSAGES,
) -> list[str]:
    rows: list[str] = []
    cases: list[tuple[str, bool, int, bool, Wire, bool]] = []
    for wire in wires:
        prefix = "" if wire.name == "chat" else f"{wire.name}, "
        for clients in client_counts:
            cases += [
                (f"{prefix}new session: latency", False, clients, False, wire, False),
                (f"{prefix}new session: first byte", True, clients, False, wire, False),
                (f"{prefix}next turn: latency", False, clients, True, wire, False),
                (f"{prefix}next turn: first byte", True, clients, True, wire, False),
                (f"{prefix}growing history: latency", False, clients, False, wire, True),
            ]
    print(HEADER, flush=True)
    for name, stream, clients, primed, wire, growing in cases:
        upstream_url = direct_urls[wire.name]
        label = f"{wire.name}-{clients}-{stream:d}-{primed:d}{'-g' if growing else ''}"
        direct: list[float] = []
        through: list[float] = []
        cpu = 0.0
        served = 0
        failed_before = len(ERRORS)
        for n in range(ROUNDS):
            share = total // ROUNDS + (n < total % ROUNDS)

            batch = functools.partial(
                load,
                clients=clients,
                total=share,
                stream=stream,
                primed=primed,
                wire=wire,
                length=length,
                growing=growing,
            )
            direct += asyncio.run(batch(upstream_url, run=f"d{label}-{n}"))
            before = cpu_seconds(proxy_pid)
            through += asyncio.run(batch(proxy_url, run=f"m{label}-{n}"))
            settled()  # the background work these requests caused is counted with them
            after = cpu_seconds(proxy_pid)
            cpu += (after or 0.0) - (before or 0.0)
            served += (share + min(clients, 8)) * (2 if primed else 1)
        d50, m50 = pct(direct, 0.5), pct(through, 0.5)
        d99, m99 = pct(direct, 0.99), pct(through, 0.99)
        per_request = f"{cpu / served * 1000:.1f}" if cpu_seconds(proxy_pid) is not None else "n/a"
        rows.append(
            f"| {name} | {clients} | {d50:.1f} | {m50:.1f} | {m50 - d50:+.1f} "
            f"| {d99:.1f} | {m99:.1f} | {m99 - d99:+.1f} | {per_request} "
            f"| {len(ERRORS) - failed_before} |"
        )
        print(rows[-1], flush=True)
    for error in dict.fromkeys(ERRORS):  # each distinct failure once
        print(f"failed request: {error}", flush=True)
    return rows


if __name__ == "__main__":
    main()
