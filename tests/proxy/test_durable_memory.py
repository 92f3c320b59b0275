"""Memory work queued for answered turns survives SIGKILL and SIGTERM: a restart completes it.

A real `memlane serve` process (on SQLite, and on PostgreSQL; memory on, fact
extraction off so every model call is a client's turn) answers turns whose memory work
waits in its batches (`memory_batch_quiet_seconds` at its longest). The process is
killed (or stopped with no time to drain); started again, it finds the turns past each
session's mark and remembers them: one user entry and one assistant entry per answered
turn.

Under load (`MANY` clients at once, the batches as configured by default), the stop
lands while memory work is waiting, running and being written: killed, or stopped with
half a second to drain, the restart still completes every stored answered turn, each
entry once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import httpx
import pytest

from memlane.config import Settings
from memlane.engine.memory.resume import pending_turns
from memlane.engine.runtime import Runtime
from memlane.store import Store, open_store
from tests.proxy.test_replicas import Replica, start_replica
from tests.support.upstream import ScriptedUpstream

SESSIONS = 3
TURNS = 4
MEMORY = {
    "MEMLANE_MEMORY_ENABLED": "true",
    "MEMLANE_MEMORY_EXTRACT_FACTS": "false",
    "MEMLANE_MEMORY_GIT": "false",
    "MEMLANE_MEMORY_WATCH": "false",
}
HELD = {  # the turns' memory work waits in its batches until the process is stopped
    **MEMORY,
    "MEMLANE_MEMORY_BATCH_QUIET_SECONDS": "60",
    "MEMLANE_MEMORY_BATCH_TURNS": "64",
    "MEMLANE_SHUTDOWN_DRAIN_SECONDS": "0",  # a stop leaves it all for the next start
}


def converse(replica: Replica) -> None:
    with httpx.Client(timeout=30) as client:
        for index in range(SESSIONS):
            key = f"durable-{index}"
            history: list[dict[str, str]] = []
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"{key} says thing {turn}"})
                answer = client.post(
                    f"{replica.url}/v1/chat/completions",
                    json={"model": "gpt-4o-mini", "messages": history},
                    headers={"X-Memlane-Session": key},
                )
                assert answer.status_code == 200, answer.text
                text = answer.json()["choices"][0]["message"]["content"]
                history.append({"role": "assistant", "content": text})


KEYS = [f"durable-{index}" for index in range(SESSIONS)]


MANY = 200
"""Clients at once under load: the 200 streaming and non-streaming clients of the load
benchmark, as asyncio clients in this one process (the proxy, not this process, is what
saturates first). Each test of them takes 25-45 s on a shared 2-core machine, most of it
the two starts and the restart's memory work; fewer clients would not cut it much."""
STOP_AFTER = 2 * MANY
"""Turns acknowledged (all clients together) before the process is stopped: a few
seconds of traffic, so sessions have turns remembered, waiting and in flight at the
stop."""
MANY_KEYS = [f"many-{index}" for index in range(MANY)]


def entries(store: Store, keys: list[str] = KEYS) -> dict[str, tuple[int, int]]:
    """Per session key: (user entries, assistant entries) remembered (a session the store
    does not hold has none)."""
    counts: dict[str, tuple[int, int]] = {}
    for key in keys:
        session = store.find_session(key)
        if session is None:
            counts[key] = (0, 0)
            continue
        facts = store.list_facts(conversation_id=session.id, roles=("user", "assistant"))
        users = sum(f.role == "user" for f in facts)
        counts[key] = (users, len(facts) - users)
    return counts


def stored_turns(store: Store, keys: list[str] = KEYS) -> dict[str, tuple[int, int]]:
    """Per session key: (turns, turns) whose answer is stored. SIGKILL may take the last
    answer of all before its store (the turn in flight, which its client resends)."""
    counts: dict[str, tuple[int, int]] = {}
    for key in keys:
        session = store.find_session(key)
        messages = store.list_messages(session.id) if session is not None else []
        answers = sum(m.message.role == "assistant" for m in messages)
        counts[key] = (answers, answers)
    return counts


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_a_restart_completes_the_memory_work_of_every_answered_turn(
    tmp_path: Path, upstream: ScriptedUpstream, stop: signal.Signals
) -> None:
    stopped_and_resumed(tmp_path / "home", "", upstream, stop)


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_under_200_clients_a_restart_completes_the_memory_work_of_every_answered_turn(
    tmp_path: Path, upstream: ScriptedUpstream, stop: signal.Signals
) -> None:
    stopped_under_load_and_resumed(tmp_path / "home", "", upstream, stop)


def test_on_postgresql_a_restart_after_sigkill_under_200_clients_completes_it_too(
    tmp_path: Path, upstream: ScriptedUpstream, pg_url: str
) -> None:
    stopped_under_load_and_resumed(tmp_path / "home", pg_url, upstream, signal.SIGKILL)


def test_on_postgresql_a_restart_after_sigkill_completes_it_too(
    tmp_path: Path, upstream: ScriptedUpstream, pg_url: str
) -> None:
    stopped_and_resumed(tmp_path / "home", pg_url, upstream, signal.SIGKILL)


def stopped_and_resumed(
    home: Path, store_url: str, upstream: ScriptedUpstream, stop: signal.Signals
) -> None:
    """Turns answered, the process stopped by `stop` before their memory work, then started
    again: every stored turn gets its entries, and a later start finds nothing left."""
    settings = Settings(
        home=home, store_url=store_url or None, embedding_backend="hashing", memory_enabled=True
    )
    replica = start_replica(home, store_url, upstream.url, env_overrides=HELD)
    try:
        converse(replica)
    finally:
        replica.process.send_signal(stop)
        replica.process.wait(30)
    store = open_store(settings)
    try:
        assert set(entries(store).values()) == {(0, 0)}  # nothing was remembered before
        answered = stored_turns(store)
        assert sum(turns for turns, _ in answered.values()) >= SESSIONS * TURNS - 1
    finally:
        store.close()

    log = restart_completes(home, store_url, upstream.url, settings, KEYS, answered)
    total = sum(turns for turns, _ in answered.values())
    assert f"resumed the memory work of {total} turn(s) in {SESSIONS} session(s)" in log


def restart_completes(
    home: Path,
    store_url: str,
    upstream_url: str,
    settings: Settings,
    keys: list[str],
    answered: dict[str, tuple[int, int]],
) -> str:
    """Start the proxy again and wait until each session's entries are its `answered`
    turns, one user and one assistant entry each; a later start would resume nothing.
    The restarted process's log."""
    again = {**MEMORY, "MEMLANE_MEMORY_BATCH_QUIET_SECONDS": "0", "MEMLANE_LOG_LEVEL": "info"}
    restarted = start_replica(home, store_url, upstream_url, env_overrides=again)
    try:
        store = open_store(settings)
        deadline = time.monotonic() + 60
        while (done := entries(store, keys)) != answered:
            missing = {k: (done[k], v) for k, v in answered.items() if done[k] != v}
            assert time.monotonic() < deadline, f"{missing}\n{restarted.log.read_text()}"
            time.sleep(0.2)
        rt = Runtime(settings, store)
        while left := pending_turns(rt):  # the marks move once each batch is done
            assert time.monotonic() < deadline, f"{len(left)} turn(s) left to resume"
            time.sleep(0.2)
        store.close()
    finally:
        restarted.process.terminate()
        restarted.process.wait(30)
    return restarted.log.read_text()


def stopped_under_load_and_resumed(
    home: Path, store_url: str, upstream: ScriptedUpstream, stop: signal.Signals
) -> None:
    """`MANY` clients talk at once with memory on (its batches as configured by default);
    the process is stopped by `stop` mid-run (SIGTERM: with half a second to drain, so
    the stop cuts memory work short, mid-write too), then started again: every stored
    answered turn gets its entries, once, and a later start finds nothing left."""
    settings = Settings(
        home=home, store_url=store_url or None, embedding_backend="hashing", memory_enabled=True
    )
    cut_short = {"MEMLANE_SHUTDOWN_DRAIN_SECONDS": "0.5"} if stop == signal.SIGTERM else {}
    replica = start_replica(home, store_url, upstream.url, env_overrides={**MEMORY, **cut_short})
    try:
        acknowledged = asyncio.run(converse_until_stopped(replica, stop))
    finally:
        if replica.process.poll() is None:
            replica.process.send_signal(stop)
        replica.process.wait(60)
    store = open_store(settings)
    try:
        answered = stored_turns(store, MANY_KEYS)
    finally:
        store.close()
    # a kill takes at most each session's last acknowledged answer before its store
    assert sum(turns for turns, _ in answered.values()) >= acknowledged - MANY

    log = restart_completes(home, store_url, upstream.url, settings, MANY_KEYS, answered)
    if stop == signal.SIGKILL:  # the turns answered last had their work waiting
        assert "resumed the memory work of" in log


async def converse_until_stopped(replica: Replica, stop: signal.Signals) -> int:
    """`MANY` clients, each in its own session resending its growing history (half of
    them streaming), until the process, sent `stop` once `STOP_AFTER` turns were
    acknowledged, no longer answers; how many turns were acknowledged in all."""
    acknowledged = 0
    limits = httpx.Limits(max_connections=MANY, max_keepalive_connections=MANY)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def converse(key: str, stream: bool) -> None:
            nonlocal acknowledged
            history: list[dict[str, str]] = []
            while True:
                history.append({"role": "user", "content": f"{key} says thing {len(history)}"})
                try:
                    text = await ask(client, replica.url, key, history, stream)
                except (httpx.TransportError, httpx.StreamError):
                    return  # the process went away: this turn is in flight
                history.append({"role": "assistant", "content": text})
                acknowledged += 1
                if acknowledged == STOP_AFTER:
                    replica.process.send_signal(stop)

        await asyncio.gather(*(converse(key, n % 2 == 1) for n, key in enumerate(MANY_KEYS)))
    return acknowledged


async def ask(
    client: httpx.AsyncClient, url: str, key: str, history: list[dict[str, str]], stream: bool
) -> str:
    """The whole answer to `history` (a streamed one read to its `[DONE]`)."""
    body = {"model": "gpt-4o-mini", "messages": history, "stream": stream}
    headers = {"X-Memlane-Session": key}
    endpoint = f"{url}/v1/chat/completions"
    if not stream:
        answer = await client.post(endpoint, json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])
    async with client.stream("POST", endpoint, json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert lines[-1:] == ["data: [DONE]"], lines
    deltas = [json.loads(line[6:])["choices"] for line in lines[:-1]]
    return "".join(c[0]["delta"].get("content") or "" for c in deltas if c)
