"""`memlane serve --workers N`: several processes on one port and one store, end to end.

Each test starts a real `memlane serve --workers N` (a supervisor and its spawned
workers) in front of the scripted upstream. Turns are sent on fresh connections, so
the kernel spreads them over the workers, and a session's turns land on different
workers; the logs say which worker answered each request.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane.files.memory_files import MemoryFiles
from memlane.files.memory_snapshot import Snapshot
from memlane.proxy.status import PUBLISH_SECONDS, pid_alive
from memlane.store import Store, open_store
from memlane.store.postgres import PostgresStore
from tests.proxy.test_replicas import expected, free_port, transcript
from tests.support.stopping import stops_slowly
from tests.support.upstream import Reply, ScriptedUpstream

SESSIONS = 8
TURNS = 6
START_SECONDS = 120.0
MEMORY_ON = {
    "MEMLANE_MEMORY_ENABLED": "true",
    "MEMLANE_MEMORY_EXTRACT_FACTS": "false",  # every model call is a client's turn
    "MEMLANE_MEMORY_GIT": "true",
}


@dataclass
class Served:
    """A running `memlane serve --workers N`."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path
    count: int

    @property
    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def serve_json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / "serve.json").read_text(encoding="utf-8"))
        return data

    def pids(self) -> dict[int, int]:
        return {int(w["index"]): int(w["pid"]) for w in self.serve_json()["workers"]}

    def wait_ready(
        self, *, exclude: frozenset[int] = frozenset(), timeout: float = START_SECONDS
    ) -> None:
        """Until every worker serves (none of the pids in `exclude`)."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited: {self.text}")
            try:
                workers = self.serve_json()["workers"]
            except (OSError, ValueError, KeyError):
                workers = []
            if len(workers) == self.count and all(
                w["ready"] and w["pid"] not in exclude for w in workers
            ):
                return
            time.sleep(0.1)
        raise AssertionError(f"workers did not start: {self.text}")

    def serving(self) -> set[int]:
        """The workers that answered a model request, from their log lines."""
        return {int(n) for n in re.findall(r"\[worker (\d+)\] POST /v1/chat", self.text)}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        self.process.send_signal(sig)
        return self.process.wait(timeout)


def serve_workers(
    home: Path, upstream_url: str, count: int, env_overrides: dict[str, str] | None = None
) -> Served:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))},
        "MEMLANE_HOME": str(home),
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        "MEMLANE_INDEX_ENABLED": "false",
        "MEMLANE_LOG_LEVEL": "info",
        **(env_overrides or {}),
    }
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / f"{home.name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "memlane.cli", "serve", "--port", str(port)),
                *("--upstream", upstream_url, "--workers", str(count)),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Served(f"http://127.0.0.1:{port}", home, process, log, count)
    served.wait_ready()
    return served


@pytest.fixture
def started() -> Iterator[list[Served]]:
    """What a test started; whatever is still running at its end is killed."""
    running: list[Served] = []
    yield running
    for served in running:
        if served.process.poll() is None:
            for pid in served.pids().values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            served.process.kill()
            served.process.wait(30)


def ask(url: str, key: str, history: list[dict[str, str]], *, stream: bool = False) -> str:
    """One turn on a fresh connection (so the kernel picks the worker)."""
    body = {"model": "gpt-4o-mini", "messages": history, "stream": stream}
    headers = {"X-Memlane-Session": key, "Authorization": "Bearer sk-client"}
    if not stream:
        response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)
        assert response.status_code == 200, response.text
        return str(response.json()["choices"][0]["message"]["content"])
    text = []
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60
    ) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"  # the stream reached its end
    for line in lines[:-1]:
        for choice in json.loads(line[6:]).get("choices", []):
            text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def converse_all(url: str, prefix: str, *, stream: bool = False) -> None:
    """`SESSIONS` conversations at once, each `TURNS` turns long, every turn on a new
    connection."""

    def converse(index: int) -> None:
        key = f"{prefix}-{index}"
        history: list[dict[str, str]] = []
        for turn in range(TURNS):
            history.append({"role": "user", "content": f"{key} turn {turn}"})
            history.append({"role": "assistant", "content": ask(url, key, history, stream=stream)})

    with ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(converse, range(SESSIONS)))


def assert_stored_once_in_order(store: Store | PostgresStore, prefix: str) -> None:
    for index in range(SESSIONS):
        key = f"{prefix}-{index}"
        assert transcript(store, key) == expected(key, TURNS), key  # type: ignore[arg-type]
        session = store.find_session(key)
        assert session is not None
        items = [
            m
            for m in store.list_messages(session.id, include_superseded=True)
            if m.message.origin == "client"
        ]
        assert len(items) == 2 * TURNS  # nothing stored twice, nothing superseded


def test_three_workers_on_sqlite_store_every_turn_once_and_keep_the_memory_files_whole(
    tmp_path: Path, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    served = serve_workers(tmp_path / "home", upstream.url, 3, MEMORY_ON)
    started.append(served)
    converse_all(served.url, "sqlite", stream=True)
    assert len(served.serving()) >= 2, served.text  # the turns really were spread
    assert served.stop() == 0, served.text

    text = served.text
    assert text.count("listening on") == 1  # the report, once
    assert not (served.home / "serve.json").exists()
    store = open_store_at(served.home)
    try:
        assert_stored_once_in_order(store, "sqlite")
        # every turn became its two memory entries, each one file, indexed once
        facts = store.list_facts(roles=("user", "assistant"))
        assert len(facts) == 2 * SESSIONS * TURNS
        files = MemoryFiles(served.home / "memory")
        on_disk = [files.read(path).fact for path in files.scan()]
        assert sorted(f.id for f in on_disk) == sorted(f.id for f in facts)
        assert sorted(f.text for f in on_disk) == sorted(f.text for f in facts)
    finally:
        store.close()
    snapshot = Snapshot.load(served.home / "memory")
    assert {seen.fact_id for seen in map(snapshot.get, snapshot.paths()) if seen} == {
        f.id for f in facts
    }
    git = ["git", "-C", str(served.home / "memory")]
    assert subprocess.run([*git, "status", "--porcelain"], capture_output=True).stdout == b""
    assert subprocess.run([*git, "log", "--oneline"], capture_output=True).stdout.strip()


def open_store_at(home: Path) -> Store:
    from memlane.config import Settings

    return open_store(Settings(home=home))


def test_workers_on_postgresql_store_every_turn_once_in_order(
    tmp_path: Path, pg_url: str, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    served = serve_workers(tmp_path / "home", upstream.url, 3, {"MEMLANE_STORE_URL": pg_url})
    started.append(served)
    converse_all(served.url, "pg")
    assert len(served.serving()) >= 2, served.text
    assert served.stop() == 0, served.text
    store = PostgresStore(pg_url)
    try:
        assert_stored_once_in_order(store, "pg")
    finally:
        store.close()


def test_sigterm_lets_every_worker_finish_its_requests_and_background_work(
    tmp_path: Path, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    served = serve_workers(tmp_path / "home", upstream.url, 2, MEMORY_ON)
    started.append(served)
    upstream.respond_with(lambda request: Reply(text="slow answer", latency=2.0))
    count = 12
    outcomes: list[str] = []

    def one(index: int) -> None:
        outcomes.append(
            ask(served.url, f"drain-{index}", [{"role": "user", "content": "hi"}], stream=True)
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(upstream.model_requests) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(upstream.model_requests) == count  # every request is in flight now
    assert served.stop(signal.SIGTERM) == 0, served.text
    for thread in threads:
        thread.join(30)
    assert outcomes == ["slow answer"] * count  # each stream reached its end
    assert served.serving() == {0, 1}, served.text  # both workers were answering
    store = open_store_at(served.home)
    try:
        for index in range(count):
            session = store.find_session(f"drain-{index}")
            assert session is not None
            roles = [m.message.role for m in store.list_messages(session.id)]
            assert roles == ["user", "assistant"]
        entries = store.list_facts(roles=("user", "assistant"))
        remembered = sorted({entry.conversation_id for entry in entries})
        assert len(entries) == 2 * count, (remembered, served.text)  # ingested
    finally:
        store.close()
    git = ["git", "-C", str(served.home / "memory")]
    assert subprocess.run([*git, "status", "--porcelain"], capture_output=True).stdout == b""


def test_a_worker_that_dies_is_reported_and_replaced(
    tmp_path: Path, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    served = serve_workers(tmp_path / "home", upstream.url, 2)
    started.append(served)
    doomed = served.pids()[1]
    os.kill(doomed, signal.SIGKILL)
    served.wait_ready(exclude=frozenset({doomed}))
    assert f"worker 1 (pid {doomed}) was killed by SIGKILL; starting a new one" in served.text
    assert served.serve_json()["restarts"] == 1

    for turn in range(20):  # both workers answer again
        ask(served.url, f"after-{turn}", [{"role": "user", "content": "still there?"}])
    assert served.serving() == {0, 1}
    from memlane.cli.status_cmd import from_proxy
    from memlane.config import Settings

    deadline = time.monotonic() + 3 * PUBLISH_SECONDS
    while True:  # each worker publishes what it did every PUBLISH_SECONDS
        report = from_proxy(Settings(home=served.home))
        assert report is not None
        if report["requests_last_hour"] >= 20 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert report["requests_last_hour"] >= 20  # added up over both workers
    assert report["workers_reporting"] == 2
    assert report["restarts"] == 1
    assert f"pid {doomed}" in report["last_restart"]
    assert [w["index"] for w in report["workers"]] == [0, 1]
    assert served.stop() == 0


def test_a_worker_that_fails_to_start_stops_the_whole_serve(
    tmp_path: Path, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    served = serve_workers(tmp_path / "home", upstream.url, 2)
    started.append(served)
    first = served.pids()
    os.kill(first[1], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while served.pids()[1] == first[1] and time.monotonic() < deadline:
        time.sleep(0.01)
    replacement = served.pids()[1]
    os.kill(replacement, signal.SIGKILL)  # before it could serve
    assert served.process.wait(60) == 1
    assert "worker 1 failed to start (was killed by SIGKILL)" in served.text
    assert not pid_alive(first[0])  # the supervisor stopped the other one too


def test_an_mcp_session_is_served_whichever_worker_its_requests_reach(
    tmp_path: Path, upstream: ScriptedUpstream, started: list[Served]
) -> None:
    """A client of the session-based MCP protocol (2025-06-18: initialize, then requests
    carrying `Mcp-Session-Id`), each request on a new connection: no worker may keep the
    session to itself."""
    from memlane.files import admin_token

    served = serve_workers(tmp_path / "home", upstream.url, 2)
    started.append(served)
    version = "2025-06-18"
    headers = {
        "authorization": f"Bearer {admin_token.read(served.home)}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": version,
    }
    url = f"{served.url}/mcp"
    hello = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    first = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        headers=headers,
        timeout=30,
    )
    assert first.status_code == 200, first.text
    if "mcp-session-id" in first.headers:
        headers["mcp-session-id"] = first.headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=done, headers=headers, timeout=30).status_code == 202
    for number in range(1, 13):
        listed = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": number, "method": "tools/list"},
            headers=headers,
            timeout=30,
        )
        assert listed.status_code == 200, listed.text
        assert "memory_search" in listed.text
    answered = set(re.findall(r"\[worker (\d+)\] POST /mcp", served.text))
    assert answered == {"0", "1"}, served.text
    assert served.stop() == 0


@pytest.mark.parametrize(("grace", "drain"), [(1, 3.0), (3, 0.0)])
def test_a_stopping_worker_gets_the_grace_and_drain_it_was_given_before_it_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grace: int, drain: float
) -> None:
    """`MEMLANE_SHUTDOWN_GRACE_SECONDS` or `MEMLANE_SHUTDOWN_DRAIN_SECONDS` raised past the
    supervisor's own margin must not have the stop they allow killed halfway."""
    from memlane.config import Settings
    from memlane.proxy import workers

    monkeypatch.setattr(workers, "STOP_MARGIN_SECONDS", 0.5)
    settings = Settings(home=tmp_path, shutdown_grace_seconds=grace, shutdown_drain_seconds=drain)
    supervisor = workers.Supervisor(settings, [])
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe(duplex=False)
    process = context.Process(target=stops_slowly, args=(2.5, theirs))
    process.start()
    theirs.close()
    assert ours.poll(60)  # started, its SIGTERM handler in place
    assert ours.recv() == "ready"
    supervisor.workers[0] = workers.Worker(0, process, ours)
    supervisor._stop_all()
    assert process.exitcode == 0  # 2.5 s: past the margin with either one left out
