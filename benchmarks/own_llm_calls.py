"""What one of memlane's own LLM calls costs the process that makes it, in CPU.

Run: .venv/bin/python benchmarks/own_llm_calls.py [--calls 2000] [--concurrency 1 16 64]

memlane's own calls (fact extraction, reconciliation, summaries, the session index) run
in the proxy's process, on the event loop the client requests share: every millisecond
of CPU one of them takes is a millisecond no request is served. The scripted upstreams
(OpenAI-compatible and Anthropic, `proxy_overhead.run_upstream`) run in a process of
their own on loopback; this process makes `--calls` calls through one pooled client as
the proxy does (`ClientPool`), `--concurrency` at a time, after a warm-up, and prints
the CPU milliseconds per call (this process's user + system time over the calls, divided
by them) and calls per second, for each API. The prompt (about 1 KB, a fact-extraction
call's size) is redacted as every own call's is: that share is the same whatever the
HTTP client. The machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import loadavg  # noqa: E402  (after the path is set)
from benchmarks.proxy_overhead import run_upstream  # noqa: E402

from memlane.text.llm import ClientPool, OpenAICompatibleLLM  # noqa: E402
from memlane.text.llm_anthropic import AnthropicLLM  # noqa: E402

PROMPT = [
    {"role": "system", "content": "Extract the facts worth remembering, as a JSON list."},
    {
        "role": "user",
        "content": "We moved the retrieval stage behind one function and ran the tests. " * 14,
    },
]
WARM_UP_CALLS = 100


async def measure(
    calls: int, concurrency: int, openai_url: str, anthropic_url: str
) -> list[tuple[str, float, float]]:
    """(API, CPU ms per call, calls per second) for each API."""
    pool = ClientPool()
    clients = {
        "openai": OpenAICompatibleLLM(
            openai_url, api_key="sk-bench", default_model="bench", clients=pool
        ),
        "anthropic": AnthropicLLM(
            anthropic_url.removesuffix("/v1"),
            api_key="sk-ant-bench",
            default_model="bench",
            clients=pool,
        ),
    }
    rows = []
    try:
        for name, llm in clients.items():
            gate = asyncio.Semaphore(concurrency)

            async def one(
                llm: OpenAICompatibleLLM | AnthropicLLM = llm, gate: asyncio.Semaphore = gate
            ) -> None:
                async with gate:
                    await llm.complete(PROMPT)

            await asyncio.gather(*(one() for _ in range(WARM_UP_CALLS)))
            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one() for _ in range(calls)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            rows.append((name, cpu * 1000 / calls, calls / wall))
    finally:
        await pool.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls measured per API")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 16, 64], help="calls at a time"
    )
    args = parser.parse_args()
    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream = multiprocessing.Process(target=run_upstream, args=(ready,), daemon=True)
    upstream.start()
    try:
        openai_url, anthropic_url = ready.get(timeout=60), ready.get(timeout=60)
        print(f"load average before: {loadavg()}", flush=True)
        print("| API | at a time | CPU ms/call | calls/s |\n| --- | ---: | ---: | ---: |")
        for concurrency in args.concurrency:
            rows = asyncio.run(measure(args.calls, concurrency, openai_url, anthropic_url))
            for name, cpu_ms, rate in rows:
                print(f"| {name} | {concurrency} | {cpu_ms:.2f} | {rate:.0f} |", flush=True)
        print(f"load average after: {loadavg()}")
    finally:
        upstream.kill()
        upstream.join()


if __name__ == "__main__":
    main()
