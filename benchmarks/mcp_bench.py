"""MCP tool calls: what the MCP face adds to a memory search, in-process and over HTTP.

Run: .venv/bin/python benchmarks/mcp_bench.py [--sizes 1000 10000] [--calls 200]

For each store size N (memories with synthetic text in ten namespaces, the
connection bound to one), `memory_search` is called `--calls` times with 2–3-word
queries three ways:

- engine: `views.tools.call_tool` directly (argument reading, binding, search,
  the text answer);
- MCP in-process: the `mcp` SDK's `Client` on the `MCPServer` object (protocol
  objects, the argument middleware, schema validation, no transport);
- MCP over HTTP: the SDK's streamable HTTP client against memlane's app served by
  uvicorn on loopback (`/mcp` with the admin token and the Host/Origin checks).

The first call of each way warms caches and is not counted. Prints a Markdown
table of p50 / p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memlane.config import Settings
from memlane.engine.memory.entries import new_fact
from memlane.engine.runtime import Runtime
from memlane.files import admin_token
from memlane.files.memory_files import new_id
from memlane.mcp.server import build_server
from memlane.proxy.app import create_app
from memlane.store import open_store
from memlane.views.tools import Binding, call_tool

WORDS = (
    "deploy release train staging host database orders login refactor invoice printer "
    "weather cache queue worker retry timeout schema migration index token budget memory "
    "session summary review test flaky build docker kubernetes terraform secret rotate"
).split()
NAMESPACES = 10


def sentence(rng: random.Random) -> str:
    return "The " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + "."


async def fill(rt: Runtime, size: int) -> None:
    rng = random.Random(size)
    facts = [
        new_fact(
            scope=f"ns:repo{i % NAMESPACES}",
            conversation_id="bench",
            role="memory",
            text=sentence(rng),
            fact_id=new_id(),
        )
        for i in range(size)
    ]
    await rt.memory_book.write(puts=facts)


async def timed(calls: int, call: Callable[[str], Awaitable[object]]) -> tuple[float, float]:
    rng = random.Random(7)
    queries = [" ".join(rng.sample(WORDS, rng.randint(2, 3))) for _ in range(calls + 1)]
    await call(queries[0])
    spent = []
    for query in queries[1:]:
        started = time.perf_counter()
        await call(query)
        spent.append((time.perf_counter() - started) * 1000)
    spent.sort()
    return statistics.median(spent), spent[int(len(spent) * 0.95) - 1]


def serve(app: object) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, port


async def measure(size: int, calls: int, home: Path) -> list[str]:
    settings = Settings(home=home, embedding_backend="hashing", memory_git=False)
    rt = Runtime(settings, open_store(settings))
    await fill(rt, size)
    binding = Binding(namespace="repo3")
    rows = []

    async def engine(query: str) -> object:
        return await call_tool(rt, binding, "memory_search", {"query": query})

    rows.append(("engine", await timed(calls, engine)))
    server = build_server(lambda: rt, lambda _headers: binding)
    async with Client(server) as client:

        async def inprocess(query: str) -> object:
            return await client.call_tool("memory_search", {"query": query})

        rows.append(("MCP in-process", await timed(calls, inprocess)))
    rt.close()

    http_rt = Runtime(settings, open_store(settings))
    uv, thread, port = serve(create_app(settings, runtime=http_rt))
    try:
        token = admin_token.read(settings.home_path)
        headers = {"authorization": f"Bearer {token}", "x-memlane-repo": "repo3"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as c,
        ):

            async def over_http(query: str) -> object:
                return await c.call_tool("memory_search", {"query": query})

            rows.append(("MCP over HTTP", await timed(calls, over_http)))
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        http_rt.close()
    return [f"| {size:,} | {way} | {p50:.1f} | {p95:.1f} |" for way, (p50, p95) in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print("| memories | way | p50 (ms) | p95 (ms) |")
    print("| --- | --- | --- | --- |")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as home:
            for row in asyncio.run(measure(size, args.calls, Path(home))):
                print(row, flush=True)


if __name__ == "__main__":
    main()
