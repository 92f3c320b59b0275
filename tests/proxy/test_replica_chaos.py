"""Replicas on one PostgreSQL while one of them is killed and restarted mid-run.

Three `memlane serve` processes share one database, with memory on (turns are
indexed and recalled through PostgreSQL's keyword statistics). Sessions talk at
once, each turn sent to the next replica in turn; a client whose replica went
away sends the same turn to the next one, as a load balancer would. Midway, one
replica is SIGKILLed (whatever it was doing) and restarted. Then: no answer was
a 5xx of memlane's own, and every turn a client got an answer for is stored
exactly once, in order.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from memlane.store.postgres import PostgresStore
from tests.proxy.test_replicas import Replica, expected, start_replica, transcript
from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream

REPLICAS = 3
SESSIONS = 6
TURNS = 10
KILL_AFTER = SESSIONS * TURNS // 3
"""Acknowledged turns (all sessions together) before the kill."""
MEMORY_ON = {
    "MEMLANE_MEMORY_ENABLED": "true",
    "MEMLANE_MEMORY_EXTRACT_FACTS": "false",  # no fact prompts: every model call is a turn
    "MEMLANE_MEMORY_GIT": "false",
}


class Fleet:
    """The replicas, one of which may be down while it restarts."""

    def __init__(self, homes: list[Path], store_url: str, upstream_url: str) -> None:
        self.homes, self.store_url, self.upstream_url = homes, store_url, upstream_url
        self.lock = threading.Lock()
        with ThreadPoolExecutor(len(homes)) as pool:
            self.replicas = list(pool.map(self.start, homes))

    def start(self, home: Path, port: int | None = None) -> Replica:
        return start_replica(
            home, self.store_url, self.upstream_url, port=port, env_overrides=MEMORY_ON
        )

    def url(self, index: int) -> str:
        with self.lock:
            return self.replicas[index % len(self.replicas)].url

    def kill_and_restart(self, index: int) -> None:
        doomed = self.replicas[index]
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait(10)
        port = int(doomed.url.rsplit(":", 1)[1])
        restarted = self.start(self.homes[index], port)
        with self.lock:
            self.replicas[index] = restarted

    def stop(self) -> None:
        for replica in self.replicas:
            if replica.process.poll() is None:
                replica.process.terminate()
                replica.process.wait(20)


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str, upstream: ScriptedUpstream) -> Iterator[Fleet]:
    homes = [tmp_path / f"replica-{i}" for i in range(REPLICAS)]
    started = Fleet(homes, pg_url, upstream.url)
    try:
        yield started
    finally:
        started.stop()


def test_a_replica_killed_and_restarted_mid_run_loses_and_doubles_nothing(
    fleet: Fleet, pg_url: str, upstream: ScriptedUpstream
) -> None:
    # A model that takes a moment, so that requests are in flight when the kill comes.
    def slow_echo(request: RecordedRequest) -> Reply:
        last = request.messages[-1].get("content") if request.messages else ""
        return Reply(text=f"echo: {last}", latency=0.05)

    upstream.respond_with(slow_echo)
    acknowledged: list[str] = []
    own_errors: list[str] = []
    retried: list[str] = []
    killed = threading.Event()

    def converse(index: int) -> None:
        key = f"chaos-session-{index}"
        history: list[dict[str, str]] = []
        attempt = index
        with httpx.Client(timeout=60) as client:
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"{key} turn {turn}"})
                while True:
                    attempt += 1
                    url = fleet.url(attempt)
                    try:
                        response = client.post(
                            f"{url}/v1/chat/completions",
                            json={"model": "gpt-4o-mini", "messages": history},
                            headers={"X-Memlane-Session": key},
                        )
                    except httpx.TransportError:  # that replica is down: the next one
                        retried.append(f"{key} turn {turn}")
                        time.sleep(0.05)
                        continue
                    if response.status_code >= 500:
                        own_errors.append(f"{url} {response.status_code} {response.text[:300]}")
                    assert response.status_code == 200, response.text
                    break
                answer = response.json()["choices"][0]["message"]["content"]
                history.append({"role": "assistant", "content": answer})
                acknowledged.append(key)

    def chaos() -> None:
        deadline = time.monotonic() + 120
        while len(acknowledged) < KILL_AFTER and time.monotonic() < deadline:
            time.sleep(0.01)
        fleet.kill_and_restart(0)
        killed.set()

    killer = threading.Thread(target=chaos)
    killer.start()
    with ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(converse, range(SESSIONS)))
    killer.join(120)

    assert killed.is_set()
    assert own_errors == []
    assert len(acknowledged) == SESSIONS * TURNS
    store = PostgresStore(pg_url)
    try:
        for index in range(SESSIONS):
            key = f"chaos-session-{index}"
            assert transcript(store, key) == expected(key, TURNS), key
    finally:
        store.close()
