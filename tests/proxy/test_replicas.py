"""Two `memlane serve` processes on one PostgreSQL: the scale-out promise, end to end.

Each replica is a real process with its own data home (as on two machines),
sharing only the database; the LLM behind them is the scripted upstream.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memlane.store.postgres import PostgresStore
from tests.support.upstream import Hang, RecordedRequest, ScriptedUpstream

SESSIONS = 20
TURNS = 20


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_replica(
    home: Path,
    store_url: str,
    upstream_url: str,
    *,
    port: int | None = None,
    env_overrides: dict[str, str] | None = None,
) -> Replica:
    port = port or free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))},
        "MEMLANE_HOME": str(home),
        "MEMLANE_STORE_URL": store_url,
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        "MEMLANE_MEMORY_ENABLED": "false",
        "MEMLANE_INDEX_ENABLED": "false",
        "MEMLANE_LOG_LEVEL": "warning",
        **(env_overrides or {}),
    }
    home.mkdir(parents=True, exist_ok=True)
    log = home / "serve.log"
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memlane.cli",
                "serve",
                "--port",
                str(port),
                "--upstream",
                upstream_url,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    replica = Replica(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"replica exited: {log.read_text()}")
        try:
            if httpx.get(f"{replica.url}/health", timeout=1).status_code == 200:
                return replica
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"replica did not start: {log.read_text()}")


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str, upstream: ScriptedUpstream) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        with ThreadPoolExecutor(2) as pool:  # both start (and migrate) at the same moment
            futures = [
                pool.submit(start_replica, tmp_path / f"replica-{i}", pg_url, upstream.url)
                for i in range(2)
            ]
            started.extend(f.result() for f in futures)
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.terminate()
                try:
                    replica.process.wait(10)
                except subprocess.TimeoutExpired:
                    replica.process.kill()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url)
    yield store
    store.close()


def ask(client: httpx.Client, replica: Replica, key: str, history: list[dict[str, str]]) -> str:
    response = client.post(
        f"{replica.url}/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": history},
        headers={"X-Memlane-Session": key, "Authorization": "Bearer sk-client"},
    )
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def transcript(store: PostgresStore, key: str) -> list[tuple[str, str]]:
    session = store.find_session(key)
    assert session is not None, key
    return [
        (m.message.role, m.message.text)
        for m in store.list_messages(session.id, transcript_only=True)
    ]


def transcript_becomes(
    store: PostgresStore, key: str, want: list[tuple[str, str]], seconds: float = 5.0
) -> list[tuple[str, str]]:
    """The session's transcript once it is `want`, or as it is after `seconds`: a replica
    stores an answer just after its client has it."""
    deadline = time.monotonic() + seconds
    while (found := transcript(store, key)) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def expected(key: str, turns: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for turn in range(turns):
        out += [("user", f"{key} turn {turn}"), ("assistant", f"echo: {key} turn {turn}")]
    return out


def test_two_replicas_store_every_turn_once_in_order(
    replicas: list[Replica], pg_store: PostgresStore
) -> None:
    """20 sessions talk at once; each session's turns alternate between the two replicas."""

    def converse(index: int) -> None:
        key = f"replica-session-{index}"
        history: list[dict[str, str]] = []
        with httpx.Client(timeout=60) as client:
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"{key} turn {turn}"})
                answer = ask(client, replicas[(index + turn) % 2], key, history)
                history.append({"role": "assistant", "content": answer})

    with ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(converse, range(SESSIONS)))

    for index in range(SESSIONS):
        key = f"replica-session-{index}"
        assert transcript_becomes(pg_store, key, expected(key, TURNS)) == expected(key, TURNS)
        session = pg_store.find_session(key)
        assert session is not None
        client_items = [
            m
            for m in pg_store.list_messages(session.id, include_superseded=True)
            if m.message.origin == "client"
        ]
        assert len(client_items) == 2 * TURNS  # nothing stored twice, nothing superseded
        assert [m.position for m in client_items] == sorted(m.position for m in client_items)


def test_killing_a_replica_mid_request_loses_nothing_committed(
    replicas: list[Replica], pg_store: PostgresStore, upstream: ScriptedUpstream
) -> None:
    doomed, survivor = replicas
    key = "killed-mid-request"
    history: list[dict[str, str]] = []
    with httpx.Client(timeout=60) as client:
        for turn in range(3):
            history.append({"role": "user", "content": f"{key} turn {turn}"})
            history.append({"role": "assistant", "content": ask(client, doomed, key, history)})

    def hang_on(request: RecordedRequest) -> Hang | None:
        messages = (request.json or {}).get("messages") or []
        last = messages[-1].get("content") if messages else None
        return Hang(seconds=20) if last == f"{key} turn 3" else None

    upstream.respond_with(hang_on)
    history.append({"role": "user", "content": f"{key} turn 3"})
    outcome: list[BaseException | str] = []
    in_flight = threading.Thread(target=_post, args=(doomed, key, list(history), outcome))
    in_flight.start()
    deadline = time.monotonic() + 30
    while not any(_last_user(r) == f"{key} turn 3" for r in upstream.model_requests):
        assert time.monotonic() < deadline, "the request never reached the upstream"
        time.sleep(0.05)
    # the question is stored while the request is upstream: killed once it is committed
    asked = [*expected(key, 3), ("user", f"{key} turn 3")]
    assert transcript_becomes(pg_store, key, asked) == asked
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait(10)
    in_flight.join(30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], httpx.TransportError)  # its client saw the connection drop

    # Everything committed before the kill is there, once: three answered turns and the
    # fourth question, never its answer.
    assert transcript(pg_store, key) == asked

    # The client retries at the other replica, which finishes the turn without a duplicate.
    upstream.respond_with(None)
    with httpx.Client(timeout=60) as client:
        answer = ask(client, survivor, key, history)
        history.append({"role": "assistant", "content": answer})
        history.append({"role": "user", "content": f"{key} turn 4"})
        ask(client, survivor, key, history)
    assert transcript_becomes(pg_store, key, expected(key, 5)) == expected(key, 5)


def _last_user(request: RecordedRequest) -> str | None:
    messages = (request.json or {}).get("messages") or []
    return messages[-1].get("content") if messages else None


def _post(
    replica: Replica, key: str, history: list[dict[str, str]], outcome: list[BaseException | str]
) -> None:
    """Send one turn from a thread; record its answer or the error it ended with."""
    try:
        with httpx.Client(timeout=60) as client:
            outcome.append(ask(client, replica, key, history))
    except BaseException as exc:
        outcome.append(exc)
