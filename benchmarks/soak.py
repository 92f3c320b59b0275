"""Soak: mixed traffic through `memlane serve` for ten minutes, every request answered in time.

Run: .venv/bin/python benchmarks/soak.py [--minutes 10] [--per-kind 2] [--deadline 30]
        [--upstream-ms 20] [--variant defaults|memory-off|quiet] [--sample 30]

A scripted upstream and `memlane serve` (the defaults unless `--variant` says) run as
their own processes on loopback; this process sends the traffic of the suite's soak
test (`tests/support/soak.py`): fixed-prompt, growing-history, streamed and
new-session clients at once, `--per-kind` of each. A request not answered within
`--deadline` seconds, or answered with an error, is an error. Printed every
`--sample` seconds and at the end: requests so far, errors, the longest request, and
the proxy's resident memory (all its processes). Run it on a quiet machine for
figures to compare; the first error of each kind is printed as it happens.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import loadavg, rss_mb  # noqa: E402  (after the path is set)
from benchmarks.proxy_overhead import VARIANTS, run_upstream, start_proxy  # noqa: E402
from tests.support.soak import KINDS, Report, soak  # noqa: E402


async def run(args: argparse.Namespace, url: str, pid: int) -> Report:
    """The soak, with a line every `--sample` seconds."""
    report = Report()
    began = time.monotonic()
    clients = asyncio.create_task(
        soak(
            url,
            seconds=args.minutes * 60,
            per_kind=args.per_kind,
            deadline=args.deadline,
            report=report,
        )
    )
    seen: set[str] = set()
    print("| minutes | requests | errors | longest s | RSS MB |\n| --- | --- | --- | --- | --- |")
    while True:
        minutes = (time.monotonic() - began) / 60
        for error in report.errors:
            kind = error.split(": ")[1] if ": " in error else error
            if kind not in seen:
                seen.add(kind)
                print(f"first {kind}: {error}", flush=True)
        print(
            f"| {minutes:.1f} | {report.requests} | {len(report.errors)} "
            f"| {report.max_latency:.2f} | {rss_mb(pid):.0f} |",
            flush=True,
        )
        if clients.done():
            return await clients
        await asyncio.wait([clients], timeout=args.sample)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--per-kind", type=int, default=2, help=f"clients of each of {KINDS}")
    parser.add_argument("--deadline", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--upstream-ms", type=float, default=20.0, help="the model's latency")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="defaults")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between lines")
    args = parser.parse_args()

    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream = multiprocessing.Process(
        target=run_upstream, args=(ready, args.upstream_ms / 1000), daemon=True
    )
    upstream.start()
    upstream_url = ready.get(timeout=60)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as home:
        proxy, url = start_proxy(upstream_url, Path(home), variant=args.variant)
        try:
            print(
                f"soak: {args.per_kind} client(s) of each of {', '.join(KINDS)} for "
                f"{args.minutes:g} min, variant {args.variant}, upstream {args.upstream_ms:g} ms, "
                f"deadline {args.deadline:g} s per request\n",
                flush=True,
            )
            total = asyncio.run(run(args, url, proxy.pid))
        finally:
            proxy.terminate()
            upstream.terminate()
            try:
                proxy.wait(60)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait()
    print(
        f"\n{total.requests} requests, {len(total.errors)} errors, longest "
        f"{total.max_latency:.2f} s; load average {loadavg()} at the end"
    )
    if total.errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
