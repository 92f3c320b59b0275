"""SIGKILL while 16 clients talk at once: no acknowledged turn is lost, none is doubled.

A real `memlane serve` process (on SQLite, and on PostgreSQL) answers 16 clients at
once, each in its own session, each resending its whole history with a new question
every turn, half of them streaming. Midway the process is SIGKILLed, whatever it was
doing. A turn is acknowledged when its client read the whole answer (a streamed one to
its `[DONE]`). Then:

- in the store, every acknowledged turn but each session's last is stored, question
  and answer, once and in order, and past them only the session's next turns, in
  order. The last acknowledged turn may be missing, whole or in part: an answer its
  client will send back is stored just after the client has it (and, while requests
  are few and clients pause, its question with it), so a kill in that moment leaves
  the turn to the client's resend;
- started again, each client resends its history with the question the kill cut off,
  then asks one more: every session holds every turn once, in order (an answer the
  kill committed but kept from its client is superseded by the one the client got).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from memlane.config import Settings
from memlane.store import Store, open_store
from tests.proxy.test_replicas import Replica, expected, start_replica
from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream

CLIENTS = 16
KILL_AFTER = CLIENTS * 5
"""Acknowledged turns (all clients together) before the kill."""


@dataclass
class Client:
    """One client's session and what it was answered."""

    index: int
    history: list[dict[str, str]] = field(default_factory=list)
    acknowledged: int = 0
    """Turns whose whole answer the client read."""

    @property
    def key(self) -> str:
        return f"crash-{self.index}"

    @property
    def stream(self) -> bool:
        return self.index % 2 == 1

    def question(self, turn: int) -> dict[str, str]:
        return {"role": "user", "content": f"{self.key} turn {turn}"}

    def ask(self, client: httpx.Client, url: str) -> None:
        """Send the history (ending in a question) and append the whole answer."""
        body = {"model": "gpt-4o-mini", "messages": self.history, "stream": self.stream}
        headers = {"X-Memlane-Session": self.key, "Authorization": "Bearer sk-client"}
        endpoint = f"{url}/v1/chat/completions"
        if self.stream:
            with client.stream("POST", endpoint, json=body, headers=headers) as response:
                assert response.status_code == 200, response.read()
                lines = [line for line in response.iter_lines() if line.startswith("data: ")]
            assert lines[-1:] == ["data: [DONE]"], lines  # read to its end
            deltas = [json.loads(line[6:])["choices"] for line in lines[:-1]]
            text = "".join(c[0]["delta"].get("content") or "" for c in deltas if c)
        else:
            answer = client.post(endpoint, json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            text = answer.json()["choices"][0]["message"]["content"]
        assert text == f"echo: {self.key} turn {self.acknowledged}"
        self.history.append({"role": "assistant", "content": text})
        self.acknowledged += 1

    def converse(self, url: str) -> None:
        """Turn after turn until the proxy goes away (the turn in flight is left asked)."""
        with httpx.Client(timeout=60) as client:
            while True:
                self.history.append(self.question(self.acknowledged))
                try:
                    self.ask(client, url)
                except (httpx.TransportError, httpx.StreamError):
                    return


def transcript(store: Store, key: str) -> list[tuple[str, str]]:
    session = store.find_session(key)
    if session is None:
        return []
    messages = store.list_messages(session.id, transcript_only=True)
    return [(m.message.role, m.message.text) for m in messages]


def stored_client_items(store: Store, key: str) -> int:
    """What the client sent or was answered, stored in any state (superseded included)."""
    session = store.find_session(key)
    assert session is not None, key
    every = store.list_messages(session.id, include_superseded=True)
    return sum(m.message.origin == "client" for m in every)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The SQLite file in the home (""), or a fresh PostgreSQL database."""
    return "" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def test_sigkill_during_16_clients_loses_no_acknowledged_turn(
    tmp_path: Path, store_url: str, upstream: ScriptedUpstream, running: list[Replica]
) -> None:
    def slow_echo(request: RecordedRequest) -> Reply:  # requests are in flight at the kill
        last = request.messages[-1].get("content") if request.messages else ""
        return Reply(text=f"echo: {last}", latency=0.02, delay=0.002)

    upstream.respond_with(slow_echo)
    home = tmp_path / "home"
    replica = start_replica(home, store_url, upstream.url)
    running.append(replica)
    clients = [Client(index) for index in range(CLIENTS)]

    def kill_midway() -> None:
        deadline = time.monotonic() + 60
        while sum(c.acknowledged for c in clients) < KILL_AFTER:
            assert time.monotonic() < deadline, replica.log.read_text()
            time.sleep(0.005)
        replica.process.send_signal(signal.SIGKILL)
        replica.process.wait(10)

    killer = threading.Thread(target=kill_midway)
    killer.start()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda c: c.converse(replica.url), clients))
    killer.join(60)
    assert replica.process.returncode == -signal.SIGKILL

    settings = Settings(home=home, store_url=store_url or None, embedding_backend="hashing")
    store = open_store(settings)
    try:
        for client in clients:
            turns = client.acknowledged
            found = transcript(store, client.key)
            # in order, nothing doubled, nothing but the client's turns
            assert found == expected(client.key, turns + 1)[: len(found)], client.key
            assert len(found) >= 2 * (turns - 1), client.key  # all acknowledged but the last
            assert stored_client_items(store, client.key) == len(found), client.key
    finally:
        store.close()

    restarted = start_replica(home, store_url, upstream.url)
    running.append(restarted)

    def resume(client: Client) -> None:
        with httpx.Client(timeout=60) as http:
            client.ask(http, restarted.url)  # the turn the kill cut off, sent again
            client.history.append(client.question(client.acknowledged))
            client.ask(http, restarted.url)

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(resume, clients))
    restarted.process.terminate()
    assert restarted.process.wait(30) == 0, restarted.log.read_text()

    store = open_store(settings)
    try:
        for client in clients:
            assert transcript(store, client.key) == expected(client.key, client.acknowledged)
            # at most the answer the kill kept from its client is superseded by the answer
            # to the resent question; nothing else is stored twice
            assert stored_client_items(store, client.key) <= 2 * client.acknowledged + 1
    finally:
        store.close()
