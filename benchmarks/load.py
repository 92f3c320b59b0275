"""Load and soak: many streaming clients, each in its own growing session, for a fixed time.

Run: .venv/bin/python benchmarks/load.py [--clients 200] [--seconds 60] [--warmup 15]
        [--tool-steps N] [--variant defaults|turns-off|memory-off|quiet] [--workers N] [--soak]
        [--direct] [--no-engine | --floor] [--compare]

A scripted OpenAI-compatible upstream and `memlane serve` run as their own
processes on loopback (as in `proxy_overhead.py`); the clients run in
`--client-processes` processes of their own, so that the client is not what
saturates first. Each client holds one session: it sends a streamed Chat
Completions request with the whole conversation so far, reads the answer to its
last byte, appends it and its next question, and asks again at once; after
`--turns` turns it starts a new session (so a long soak keeps requests of a
realistic size). With `--tool-steps N` each question is followed by N requests of a
tool loop, as an agent at work sends them: the model's tool call and the tool's result
are appended and the question stands. Requests in the first `--warmup` seconds are not counted.
`--direct` sends the same clients straight to the upstream, with no memlane in
between: the ceiling of the rig itself on this machine (clients and upstream
share its cores with the proxy).

Printed: requests/s, p50/p99 latency (request sent to last byte), errors (any non-200,
broken stream or stream without its end), the proxy's CPU milliseconds per request (user
+ system time of its whole process tree, workers and the git or other helpers it ran
included, from the clients' first request until the background work their requests
queued is done, divided by every request answered in that time, the warm-up's included:
memory work a run leaves pending would otherwise go uncounted, and the background work
the warm-up's requests queue runs mostly after the warm-up, so counting from its end
charged it to the measured requests), and the proxy's resident memory (RSS, all
its processes) at start, after warm-up and at the end; `--compare` runs, in one
invocation against one upstream, a ladder that says where the CPU goes: straight to
the upstream, a relay with no memlane code in the proxy's place (`--floor`: what one
HTTP hop in Python costs here), memlane's HTTP face alone (`--no-engine`), memory off
(sessions stored, nothing remembered), `turns-off` (memory on, no turn kept as an
entry), the defaults, and the defaults with `--workers 2`, and prints one table
(requests/s side by side);
`--soak` (5 minutes after a 60-second warm-up unless told otherwise) also
prints RSS every `--sample` seconds, beside the background items pending and the
documents in the home's search index, and the RSS gained since the warm-up per
document added: the keyword index keeps every document in memory, so a soak that
adds two documents a request grows with them, and a leak is RSS that grows faster.
The machine's load average is printed with the figures: on a shared machine they
say as much about the neighbours as about memlane, so re-run on a quiet one for
figures to compare. So is the file system the homes are made on (`TMPDIR` chooses
it): on ext4 without a journal, making a file costs more for minutes after many were
deleted, as each run's home is as it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_overhead import (  # noqa: E402  (after the path is set)
    ANSWER,
    HEADERS,
    VARIANTS,
    run_upstream,
    start_bare_proxy,
    start_proxy,
)

QUESTION = "Which file should I look at next, and why? Keep it short."


@dataclass
class Cell:
    """One configuration measured: what `report` prints a row of."""

    label: str
    tallies: list[Tally]
    samples: list[Sample]
    cpu_seconds: float | None
    """CPU time of the proxy's process tree over the run, warm-up and the background work
    the requests queued included (None: no /proc)."""
    cpu_parts: dict[str, float] | None = None
    """The same time by the part of memlane that spent it (`/memlane/status`'s
    `cpu_seconds`, over the same span; None: not memlane)."""

    @property
    def answered(self) -> int:
        """Requests answered over the span the CPU columns cover: the warm-up's too."""
        return sum(len(t.latencies) + t.errors + t.warm for t in self.tallies)


@dataclass(frozen=True)
class Sample:
    """The proxy at one moment of a run."""

    at: float
    """Seconds since the clients started."""
    rss_mb: float
    pending: int | None = None
    """Background items pending (a soak only; None: not asked or not answered)."""
    documents: int | None = None
    """Documents in the home's search index (a soak only): the in-process keyword index
    holds them all, so a soak's RSS grows with them; the report divides one by the other."""


@dataclass
class Tally:
    """What one client process measured after the warm-up."""

    latencies: list[float] = field(default_factory=list)
    warm: int = 0
    """Requests answered in the warm-up: not timed, but their CPU is counted."""
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


@dataclass(frozen=True)
class Pattern:
    """What each client's session sends."""

    turns: int
    """Requests before the client starts a new session."""
    tool_steps: int = 0
    """Requests of a tool loop after each question: the model's tool call and its result
    are appended and the same question stands (an agent at work)."""

    def asks(self, turn: int) -> bool:
        """Whether request `turn` of a session brings a new question."""
        return turn % (self.tool_steps + 1) == 0


def error_kind(status: int, body: bytes) -> str:
    """A refused request's status and what its error says, without the addresses that
    differ between runs: a run's errors are counted by cause, not only by status (the
    502s once put down to the machine's load were a stale pooled connection)."""
    try:
        error = json.loads(body)["error"]
        said = str(error.get("code") or error.get("type") or "")
        reason = re.search(r"\(([^()]*)\)\s*$", str(error.get("message", "")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"HTTP {status}"
    return f"HTTP {status} {said}" + (f" ({reason.group(1)})" if reason else "")


def tool_round(key: str, turn: int) -> list[dict[str, Any]]:
    """The model's call of a tool, and the tool's result, as a Chat Completions client
    appends them."""
    call = {
        "id": f"call-{turn}",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "src/{key}/{turn}.py"}}'},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": f"def step_{turn}(): ...\n"},
    ]


async def _client(
    client: httpx.AsyncClient,
    url: str,
    name: str,
    pattern: Pattern,
    counting_from: float,
    until: float,
    tally: Tally,
) -> None:
    session = 0
    while time.monotonic() < until:
        key = f"{name}-s{session}"
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a careful coding agent."}
        ]
        for turn in range(pattern.turns):
            if time.monotonic() >= until:
                return
            if pattern.asks(turn):
                history.append({"role": "user", "content": f"{key} turn {turn}: {QUESTION}"})
            body = {"model": "bench", "messages": history, "stream": True}
            headers = {**HEADERS, "x-memlane-session": key}
            started = time.monotonic()
            ok, kind = False, ""
            try:
                async with client.stream(
                    "POST", f"{url}/chat/completions", json=body, headers=headers
                ) as response:
                    tail, refused = b"", b""
                    async for chunk in response.aiter_raw():
                        tail = (tail + chunk)[-64:]
                        if response.status_code != 200:
                            refused += chunk
                    ok = response.status_code == 200 and b"[DONE]" in tail
                    kind = error_kind(response.status_code, refused) if refused else ""
                    kind = kind or ("" if ok else "stream without its end")
            except httpx.HTTPError as exc:
                kind = type(exc).__name__
            if started >= counting_from:
                if ok:
                    tally.latencies.append(time.monotonic() - started)
                else:
                    tally.error(kind)
            elif ok:
                tally.warm += 1
            if not ok:
                await asyncio.sleep(0.2)  # a failing proxy is not hammered in a tight loop
                break  # start a fresh session
            if pattern.asks(turn + 1):
                history.append({"role": "assistant", "content": ANSWER})
            else:
                history.extend(tool_round(key, turn))
        session += 1


async def _own_client(
    url: str, name: str, pattern: Pattern, counting_from: float, until: float, tally: Tally
) -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(120.0, connect=30.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        await _client(client, url, name, pattern, counting_from, until, tally)


def run_clients(
    url: str,
    names: list[str],
    pattern: Pattern,
    start_at: float,
    warmup: float,
    seconds: float,
    out: multiprocessing.Queue[Tally],
) -> None:
    """One client process: its share of the clients, all on one event loop. Each client
    has an HTTP client (one connection) of its own, as separate agents do: one pool shared
    by a hundred clients costs httpx a scan of every connection per request, and that
    scan, not the proxy, was what the figures measured."""

    async def main() -> Tally:
        tally = Tally()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        begin = time.monotonic()
        await asyncio.gather(
            *(
                _own_client(url, n, pattern, begin + warmup, begin + warmup + seconds, tally)
                for n in names
            )
        )
        return tally

    out.put(asyncio.run(main()))


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (Linux), in MB. A child still between
    fork and exec (`_between_fork_and_exec`) is left out: its resident memory is its
    parent's pages, counted once already (a 3-minute soak's last sample once read 710 MB
    while the proxy itself held about 380)."""
    total = 0
    for each in [pid, *(c for c in _children(pid) if not _between_fork_and_exec(c))]:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _between_fork_and_exec(pid: int) -> bool:
    """Whether a child has not run its own program yet: Python starts a helper (git) with
    vfork, whose child shares the parent's memory until it execs; until then it has the
    parent's program and command line, or none while the exec replaces them. A spawned
    worker runs the same interpreter with a command line of its own, and counts."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        same_program = os.readlink(f"/proc/{pid}/exe") == os.readlink(f"/proc/{parent}/exe")
        return not command or (
            same_program and command == Path(f"/proc/{parent}/cmdline").read_bytes()
        )
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            for child in map(int, text):
                found += [child, *_children(child)]
    except OSError:
        pass
    return found


def cpu_tree_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its children, live or reaped (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    try:
        for each in [pid, *_children(pid)]:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return None if not total else total / tick
    return total / tick


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def homes_file_system(folder: str | None = None) -> str:
    """What the proxy's homes (temporary folders) are on, from `/proc/self/mountinfo`, and
    for ext4 whether it has a journal: without one, ext4 reads past every inode freed in
    the last minutes as it makes a file, so the memory book's CPU (two files a remembered
    turn) moves with what was deleted before the run, another run's home included
    (`docs/overhead-history.md`, 2026-12-02)."""
    where = Path(folder or tempfile.gettempdir()).resolve()
    best: tuple[int, str, str] = (-1, "unknown", "")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    for line in lines:
        fields = line.split()
        mount_point, rest = fields[4], fields[fields.index("-") + 1 :]
        if where.is_relative_to(mount_point) and len(mount_point) > best[0]:
            best = (len(mount_point), rest[0], rest[1])
    _, kind, device = best
    if kind != "ext4":
        return kind
    journal = Path(f"/proc/fs/jbd2/{Path(device).name}-8").exists()
    return "ext4 with a journal" if journal else "ext4 without a journal"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, help="measured time (60; 300 with --soak)")
    parser.add_argument("--warmup", type=float, help="uncounted time first (15; 60 with --soak)")
    parser.add_argument("--turns", type=int, default=30, help="turns before a client starts over")
    parser.add_argument(
        "--tool-steps",
        type=int,
        default=0,
        help="tool-loop requests after each question (the question stands, a tool result comes)",
    )
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="defaults")
    parser.add_argument("--workers", type=int, default=1, help="memlane serve --workers")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMLANE_NAME=VALUE",
        help="a setting for the proxy on top of the variant (repeat for more)",
    )
    parser.add_argument("--upstream-ms", type=float, default=0.0, help="the model's latency")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--soak", action="store_true", help="5 minutes, RSS every --sample s")
    parser.add_argument("--sample", type=float, default=30.0)
    parser.add_argument("--direct", action="store_true", help="no memlane: the rig's ceiling")
    parser.add_argument(
        "--no-engine",
        action="store_true",
        help="memlane with the engine's stages as no-ops: what its HTTP face alone costs",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="a relay with no memlane code in the proxy's place: the floor under memlane's",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="direct, HTTP face, memory off, turns off, defaults, --workers 2: one table",
    )
    args = parser.parse_args()
    seconds = args.seconds or (300.0 if args.soak else 60.0)
    warmup = args.warmup if args.warmup is not None else (60.0 if args.soak else 15.0)

    ready: multiprocessing.Queue[str] = multiprocessing.Queue()
    upstream = multiprocessing.Process(
        target=run_upstream, args=(ready, args.upstream_ms / 1000), daemon=True
    )
    upstream.start()
    upstream_url = ready.get(timeout=60)
    anthropic_url = ready.get(timeout=60)
    try:
        run = functools.partial(measure, args, upstream_url, upstream.pid, seconds, warmup)
        if args.compare:
            cells = [
                run(direct=True),
                run(bare=anthropic_url, floor=True),
                run(bare=anthropic_url),
                run(variant="memory-off"),
                run(variant="turns-off"),
                run(variant="defaults"),
                run(workers=2),
            ]
        else:
            cells = [
                run(
                    direct=args.direct,
                    bare=anthropic_url if args.no_engine or args.floor else None,
                    floor=args.floor,
                    variant=args.variant,
                    workers=args.workers,
                )
            ]
    finally:
        upstream.terminate()
    report(args, seconds, warmup, cells)


def measure(
    args: argparse.Namespace,
    upstream_url: str,
    upstream_pid: int | None,
    seconds: float,
    warmup: float,
    *,
    direct: bool = False,
    bare: str | None = None,
    floor: bool = False,
    variant: str = "defaults",
    workers: int = 1,
) -> Cell:
    """One configuration: its clients run, its figures taken. `bare` (the Anthropic
    upstream's URL) runs the proxy with the engine's stages as no-ops, or with `floor` a
    relay with no memlane code."""
    if direct:
        assert upstream_pid is not None
        tallies, samples, cpu = drive(args, upstream_url, upstream_pid, seconds, warmup)
        return Cell("straight to the upstream (no memlane)", tallies, samples, None)
    if bare is not None:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as home:
            process, url = start_bare_proxy(upstream_url, bare, Path(home), floor=floor)
            try:
                assert process.pid is not None
                tallies, samples, cpu = drive(args, url, process.pid, seconds, warmup)
            finally:
                process.kill()
        label = "a bare relay (no memlane code)" if floor else "memlane's HTTP face alone"
        return Cell(label, tallies, samples, cpu)
    extra = ("--workers", str(workers)) if workers > 1 else ()
    label = f"memlane, {variant}" + (f", --workers {workers}" if workers > 1 else "")
    settings = dict(pair.split("=", 1) for pair in args.set)
    label += "".join(f", {name}={value}" for name, value in settings.items())
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as home:
        proxy, url = start_proxy(
            upstream_url, Path(home), variant=variant, extra=settings, serve_args=extra
        )
        try:
            drained = functools.partial(wait_drained, url, Path(home), label)
            pending = functools.partial(pending_now, url, admin_headers(Path(home)))
            documents = functools.partial(documents_now, Path(home))
            parts = CpuParts(url, admin_headers(Path(home)))
            tallies, samples, cpu = drive(
                args, url, proxy.pid, seconds, warmup, drained, pending, parts, documents
            )
        finally:
            proxy.terminate()
            try:
                proxy.wait(SHUTDOWN_SECONDS)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait()
    return Cell(label, tallies, samples, cpu, parts.spent)


SHUTDOWN_SECONDS = 60
"""How long the proxy gets to finish its background work once told to stop."""


DRAIN_SECONDS = 300
"""How long the background work the measured requests queued may take to finish once
the clients stopped; its CPU counts toward theirs."""


def admin_headers(home: Path) -> dict[str, str]:
    """What `/memlane/status` asks of a caller: the home's admin token (written at start)."""
    from memlane.files import admin_token

    return {"authorization": f"Bearer {admin_token.read(home)}"}


def background(url: str, headers: dict[str, str]) -> tuple[int, int]:
    """The proxy's background items pending and dropped so far (`/memlane/status`)."""
    status = httpx.get(f"{url}/memlane/status", headers=headers, timeout=30).json()
    return int(status["background_pending"]), int(status["background_dropped"])


def pending_now(url: str, headers: dict[str, str]) -> int | None:
    """Background items pending now, for a soak's samples (None: not answered)."""
    try:
        return background(url, headers)[0]
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def documents_now(home: Path) -> int | None:
    """Documents in the home's search index now, read from its database without writing
    to it (None: not readable, as before the proxy made it)."""
    try:
        db = sqlite3.connect(f"file:{home / 'memlane.db'}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT count(*) FROM docs").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return None


PROCESS = "process"
"""The whole process's part in `cpu_seconds` (`memlane.proxy.cpu.PROCESS`; not imported:
the script also measures older builds, put first on `PYTHONPATH`)."""


class CpuParts:
    """The proxy's CPU seconds by part (`/memlane/status`), read when `drive` reads its
    process tree's: `spent` is the difference (None until both were read)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.first: dict[str, float] | None = None
        self.spent: dict[str, float] | None = None

    def __call__(self) -> None:
        try:
            status = httpx.get(f"{self.url}/memlane/status", headers=self.headers, timeout=30)
            now = {part: float(s) for part, s in status.json()["cpu_seconds"].items()}
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return
        if self.first is None:
            self.first = now
        else:
            self.spent = {part: s - self.first.get(part, 0.0) for part, s in now.items()}


def wait_drained(url: str, home: Path, label: str) -> None:
    """Wait until the proxy's background queue is empty (its CPU belongs to the requests
    that queued it: a run that ends with work pending would leave it uncounted); say
    what it held when the clients stopped and how long it took."""
    headers = admin_headers(home)
    started = time.monotonic()
    first: str | None = None
    while True:
        try:
            pending, dropped = background(url, headers)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            print(f"{label}: background work: n/a ({exc!r})", flush=True)
            return
        first = first or f"{pending} pending, {dropped} dropped"
        waited = time.monotonic() - started
        if not pending or waited > DRAIN_SECONDS:
            done = "done" if not pending else f"{pending} still pending"
            print(
                f"{label}: background work when the clients stopped: {first}; "
                f"{done} after {waited:.1f} s (its CPU is counted)",
                flush=True,
            )
            return
        time.sleep(0.5)


def drive(
    args: argparse.Namespace,
    url: str,
    pid: int,
    seconds: float,
    warmup: float,
    drain: Callable[[], None] | None = None,
    pending: Callable[[], int | None] | None = None,
    parts: Callable[[], None] | None = None,
    documents: Callable[[], int | None] | None = None,
) -> tuple[list[Tally], list[Sample], float | None]:
    """Run the clients; sample the proxy's RSS meanwhile, in a soak with its background
    items `pending` and the index's `documents` (a soak's growth is work waiting, data
    held or memory lost); and its process tree's CPU seconds from the clients' start
    until they are done and `drain` returned (the background work their requests queued
    is done)."""
    names = [f"load-{os.getpid()}-{i}" for i in range(args.clients)]
    shares = [names[i :: args.client_processes] for i in range(args.client_processes)]
    out: multiprocessing.Queue[Tally] = multiprocessing.Queue()
    start_at = time.time() + 2.0  # every client process starts together
    processes = [
        multiprocessing.Process(
            target=run_clients,
            args=(url, share, Pattern(args.turns, args.tool_steps), start_at, warmup, seconds, out),
            daemon=True,
        )
        for share in shares
        if share
    ]
    for process in processes:
        process.start()

    def sample(at: float) -> Sample:
        if not args.soak:
            return Sample(at, rss_mb(pid))
        return Sample(
            at,
            rss_mb(pid),
            pending() if pending is not None else None,
            documents() if documents is not None else None,
        )

    samples = [sample(0.0)]
    time.sleep(max(0.0, start_at - time.time()))
    cpu_from = cpu_tree_seconds(pid)
    if parts is not None:
        parts()
    begin = time.monotonic()
    marks = [warmup, *(warmup + t for t in _steps(seconds, args.sample if args.soak else 0))]
    for mark in marks:
        time.sleep(max(0.0, begin + mark - time.monotonic()))
        samples.append(sample(mark))
    tallies = [out.get(timeout=seconds + warmup + 300) for _ in processes]
    samples.append(sample(time.monotonic() - begin))
    if drain is not None:
        drain()
    cpu_to = cpu_tree_seconds(pid)
    if parts is not None:
        parts()
    for process in processes:
        process.join(10)
    cpu = cpu_to - cpu_from if cpu_from is not None and cpu_to is not None else None
    return tallies, samples, cpu


def _steps(seconds: float, every: float) -> list[float]:
    if every <= 0:
        return []
    steps, t = [], every
    while t < seconds:
        steps.append(t)
        t += every
    return steps


def report(args: argparse.Namespace, seconds: float, warmup: float, cells: list[Cell]) -> None:
    print(
        f"\nmemlane under load: {args.clients} streaming clients, "
        f"{seconds:g} s measured after {warmup:g} s of warm-up, "
        f"upstream answering after {args.upstream_ms:g} ms; {os.cpu_count()} cores, "
        f"load average {loadavg()} at the end; the homes on {homes_file_system()}\n"
    )
    print(
        "| through | requests | req/s | p50 ms | p99 ms | errors | proxy CPU ms/request "
        "| RSS start MB | RSS after warm-up MB | RSS end MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for cell in cells:
        latencies = [x for t in cell.tallies for x in t.latencies]
        errors = sum(t.errors for t in cell.tallies)
        answered = cell.answered
        cpu = (
            f"{cell.cpu_seconds * 1000 / answered:.2f}"
            if cell.cpu_seconds is not None and answered
            else "-"
        )
        start, warm, end = (cell.samples[i].rss_mb for i in (0, 1, -1))
        print(
            f"| {cell.label} | {len(latencies)} | {len(latencies) / seconds:.1f} "
            f"| {pct(latencies, 0.5):.0f} | {pct(latencies, 0.99):.0f} | {errors} | {cpu} "
            f"| {start:.0f} | {warm:.0f} | {end:.0f} |"
        )
    _parts_table(cells)
    for cell in cells:
        kinds: dict[str, int] = {}
        for t in cell.tallies:
            for kind, n in t.error_kinds.items():
                kinds[kind] = kinds.get(kind, 0) + n
        if kinds:
            print(f"\nerrors ({cell.label}): " + ", ".join(f"{k}: {n}" for k, n in kinds.items()))
    if args.soak:
        for cell in cells:
            _soak_table(cell)


def _soak_table(cell: Cell) -> None:
    """RSS over the soak beside what it holds: the background items pending and the
    index's documents, with the RSS gained since the warm-up per document added (the
    keyword index keeps every document's postings in memory; a leak shows as RSS that
    grows while neither does)."""
    warm = cell.samples[1]
    print(
        f"\n{cell.label}\n\n| seconds | RSS MB | change since warm-up MB "
        "| background items pending | index documents | KB gained a document added |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for each in cell.samples[1:]:
        waiting = "-" if each.pending is None else str(each.pending)
        docs = "-" if each.documents is None else str(each.documents)
        added = (
            each.documents - warm.documents
            if each.documents is not None and warm.documents is not None
            else 0
        )
        per_doc = f"{(each.rss_mb - warm.rss_mb) * 1024 / added:.2f}" if added > 0 else "-"
        print(
            f"| {each.at:.0f} | {each.rss_mb:.0f} | {each.rss_mb - warm.rss_mb:+.0f} "
            f"| {waiting} | {docs} | {per_doc} |"
        )


def _parts_table(cells: list[Cell]) -> None:
    """Each memlane row's CPU a request by the part that spent it (`proxy.cpu`), over the
    same span as the CPU column: where the time goes, without a profiler. With several
    workers the other workers' figures are as they last published them (every 2 s)."""
    measured = [cell for cell in cells if cell.cpu_parts]
    if not measured:
        return
    named = {part for cell in measured for part in cell.cpu_parts or {}} - {PROCESS}

    def largest(part: str) -> float:
        return max((cell.cpu_parts or {}).get(part, 0.0) for cell in measured)

    order = sorted(named, key=lambda part: -largest(part))
    print("\nwhere the proxy's CPU went, ms a request (`memlane status`'s CPU seconds by part)\n")
    print("| through | " + " | ".join(order) + " | the process |")
    print("| --- |" + " --- |" * (len(order) + 1))
    for cell in measured:
        assert cell.cpu_parts is not None
        answered = cell.answered or 1
        row = [cell.cpu_parts.get(part, 0.0) * 1000 / answered for part in order]
        whole = cell.cpu_parts.get(PROCESS, 0.0) * 1000 / answered
        print(f"| {cell.label} | " + " | ".join(f"{ms:.2f}" for ms in row) + f" | {whole:.2f} |")


if __name__ == "__main__":
    main()
