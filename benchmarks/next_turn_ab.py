"""Two builds of memlane side by side: what each adds to a session's next turn, in one run.

Run: .venv/bin/python benchmarks/next_turn_ab.py --before PATH [--after PATH]
        [--requests 60] [--upstream-ms 300] [--messages 20] [--gap-ms 0]

`--before` and `--after` are `src` folders of two checkouts (`--after` defaults to this
one's): make one with `git worktree add /tmp/before <rev>`. Both proxies run with the
defaults a new user gets, behind one scripted upstream; each round sends the direct
request, then for each build (in alternating order) a new session's first 18 messages
and, at once, its next turn, as `proxy_overhead.py` does. Only the next turns are timed.
`--new-sessions` times each session's first request instead (all its messages new, the
session created), with nothing sent before it; `--growing` times every turn of one
session per build whose history grows by the answer and a new question each round (up
to `--messages`, then a new session), nothing sent between.

On a shared machine latency drifts by a millisecond from one run to the next, more than
most changes to the request path move it; two builds measured in one run, request by
request, see the same drift. Reported per build: the next turn's added p50 and p90
(against the direct requests of the same rounds), each `Server-Timing` stage's p50, and
the proxy process's CPU seconds for the whole run (its background work included, read
after `--drain-s` of quiet).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import proxy_overhead as po  # noqa: E402

WARM_UP = 4
"""Rounds sent first and not counted: both proxies load what their first turns need."""


def start(upstream_url: str, src: str) -> tuple[po.Process, str]:
    """A proxy with the defaults, importing memlane from `src`."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src
    try:
        return po.start_proxy(upstream_url, Path(tempfile.mkdtemp()), variant="defaults")
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def cpu_cell(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.1f}"


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


async def rounds(
    direct: str,
    proxies: dict[str, str],
    *,
    requests: int,
    length: int,
    gap: float,
    new_sessions: bool = False,
    growing: bool = False,
) -> tuple[list[float], dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    wire = po.WIRES["chat"]
    grown = {name: po.Growing(length) for name in ["direct", *proxies]}
    direct_ms: list[float] = []
    added: dict[str, list[float]] = {name: [] for name in proxies}
    stages: dict[str, dict[str, list[float]]] = {name: {} for name in proxies}
    async with httpx.AsyncClient(timeout=60) as client:
        for number in range(requests + WARM_UP):
            tag = f"ab{number}-{time.time_ns()}"
            messages = po.conversation(tag, length)
            earlier = wire.body(messages[:-2], stream=False)
            answer = {"role": "assistant", "content": po.ANSWER}
            asked = {"role": "user", "content": f"{tag}: and now?"}
            body = wire.body([*messages[:-2], answer, asked], stream=False)
            if new_sessions:
                body = wire.body(messages, stream=False)
            if growing:
                body = wire.body(grown["direct"].next_turn(tag), stream=False)
            started = time.perf_counter()
            (await client.post(direct + wire.path, json=body)).raise_for_status()
            took = (time.perf_counter() - started) * 1000
            counted = number >= WARM_UP
            if counted:
                direct_ms.append(took)
            names = list(proxies) if number % 2 == 0 else list(reversed(proxies))
            for name in names:
                url = proxies[name] + wire.path
                headers = {**wire.headers, wire.session_header: tag}
                if growing:
                    body = wire.body(grown[name].next_turn(tag), stream=False)
                    headers = {**wire.headers, wire.session_header: grown[name].key}
                elif not new_sessions:
                    (await client.post(url, json=earlier, headers=headers)).raise_for_status()
                if gap:
                    await asyncio.sleep(gap)
                started = time.perf_counter()
                response = await client.post(url, json=body, headers=headers)
                took = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                if not counted:
                    continue
                added[name].append(took)
                for part in response.headers.get("server-timing", "").split(","):
                    stage, _, value = part.strip().partition(";dur=")
                    if value:
                        stages[name].setdefault(stage, []).append(float(value))
    return direct_ms, added, stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the src folder of the build before")
    parser.add_argument("--after", default=str(ROOT / "src"), help="the src folder to compare")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--upstream-ms", type=float, default=300)
    parser.add_argument("--messages", type=int, default=po.MESSAGES)
    parser.add_argument("--gap-ms", type=float, default=0, help="wait before each next turn")
    parser.add_argument(
        "--new-sessions", action="store_true", help="time each session's first request instead"
    )
    parser.add_argument(
        "--growing",
        action="store_true",
        help="time the next turn of a session whose history grows each turn instead",
    )
    parser.add_argument("--drain-s", type=float, default=20, help="quiet before reading CPU")
    args = parser.parse_args()

    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream = multiprocessing.Process(
        target=po.run_upstream, args=(ready, args.upstream_ms / 1000), daemon=True
    )
    upstream.start()
    upstream_url, _ = ready.get(), ready.get()
    builds = {"before": args.before, "after": args.after}
    started = {name: start(upstream_url, src) for name, src in builds.items()}
    try:
        direct, added, stages = asyncio.run(
            rounds(
                upstream_url,
                {name: url for name, (_, url) in started.items()},
                requests=args.requests,
                length=args.messages,
                gap=args.gap_ms / 1000,
                new_sessions=args.new_sessions,
                growing=args.growing,
            )
        )
        time.sleep(args.drain_s)
        cpu = {name: po.cpu_seconds(process.pid) for name, (process, _) in started.items()}
    finally:
        for process, _ in started.values():
            process.kill()
        upstream.kill()

    timed = "new sessions' first requests" if args.new_sessions else "next turns"
    if args.growing:
        timed = "turns of growing histories"
    print(
        f"\n{args.messages}-message {timed}, {args.requests} per build, upstream answering "
        f"after {args.upstream_ms:g} ms; milliseconds added to the direct request\n"
    )
    names = sorted({stage for per in stages.values() for stage in per} - {"memlane-upstream"})
    head = ["build", "+p50", "+p90", *(f"{n.removeprefix('memlane-')} p50" for n in names)]
    print("| " + " | ".join([*head, "CPU s"]) + " |")
    print("|" + " --- |" * (len(head) + 1))
    for name in builds:
        plus50 = statistics.median(added[name]) - statistics.median(direct)
        plus90 = p90(added[name]) - p90(direct)
        cells = [f"{statistics.median(stages[name].get(n, [0.0])):.2f}" for n in names]
        row = [name, f"+{plus50:.2f}", f"+{plus90:.2f}", *cells, cpu_cell(cpu[name])]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
