"""What one large request costs: the proxy's peak memory and how much the home grows.

Run: .venv/bin/python benchmarks/large_request.py [--mb 30] [--set MEMLANE_NAME=value ...]

A scripted upstream runs in this process (`write_path.start_upstream`: it answers
memlane's own prompts too); `memlane serve` runs as its own process with a fresh
home. One chat request carrying a single user message of `--mb` megabytes is sent,
then the background is waited out (`write_path.settle`). Printed: the proxy's peak
RSS (VmHWM) before and after the request, how much the home grew in all and per
part (the database and its WAL, the memory files with git), and memlane's own
calls by kind. `--set MEMLANE_MEMORY_MESSAGE_CHARS=100000000` lifts the per-message
ceiling, for the figures without it.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_overhead import HEADERS, start_proxy  # noqa: E402
from benchmarks.write_path import settle, start_upstream  # noqa: E402

MB = 1024 * 1024


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / MB
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--set", action="append", default=[], metavar="MEMLANE_NAME=value")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.set)
    calls: Counter[str] = Counter()
    upstream = start_upstream(calls)
    with TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        process, url = start_proxy(upstream, home, variant="defaults", extra=extra)
        try:
            settle(url, home)
            before_rss, before_home = peak_rss_mb(process.pid), size_mb(home)
            words = "I care about Lisbon. " + "and this is a long pasted log line. " * int(
                args.mb * MB / 36
            )
            body = {"model": "bench", "messages": [{"role": "user", "content": words}]}
            headers = {**HEADERS, "x-memlane-session": "large"}
            response = httpx.post(
                f"{url}/chat/completions", json=body, headers=headers, timeout=600
            )
            response.raise_for_status()
            settle(url, home)
            after_rss = peak_rss_mb(process.pid)
            print(
                f"request       {len(words) / MB:.1f} MB user message, "
                f"answered {response.status_code}"
            )
            print(f"peak RSS      {before_rss:.0f} MB before, {after_rss:.0f} MB after")
            print(f"home growth   {size_mb(home) - before_home:.1f} MB in all")
            for part in ("memlane.db", "memlane.db-wal", "memory", "sessions"):
                print(f"  {part:<16}{size_mb(home / part):.1f} MB")
            print(f"own calls     {dict(calls)}")
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
