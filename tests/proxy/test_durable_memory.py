"""Memory work queued for answered turns survives SIGKILL and SIGTERM: a restart completes it.

A real `memlane serve` process (on SQLite, and on PostgreSQL; memory on, fact
extraction off so every model call is a client's turn) answers turns whose memory work
waits in its batches (`memory_batch_quiet_seconds` at its longest). The process is
killed (or stopped with no time to drain); started again, it finds the turns past each
session's mark and remembers them: one user entry and one assistant entry per answered
turn.
"""

from __future__ import annotations

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


def entries(store: Store) -> dict[str, tuple[int, int]]:
    """Per session key: (user entries, assistant entries) remembered."""
    counts: dict[str, tuple[int, int]] = {}
    for index in range(SESSIONS):
        session = store.find_session(f"durable-{index}")
        assert session is not None
        facts = store.list_facts(conversation_id=session.id, roles=("user", "assistant"))
        users = sum(f.role == "user" for f in facts)
        counts[session.key] = (users, len(facts) - users)
    return counts


def stored_turns(store: Store) -> dict[str, tuple[int, int]]:
    """Per session key: (turns, turns) whose answer is stored. SIGKILL may take the last
    answer of all before its store (the turn in flight, which its client resends)."""
    counts: dict[str, tuple[int, int]] = {}
    for index in range(SESSIONS):
        session = store.find_session(f"durable-{index}")
        assert session is not None
        answers = [m for m in store.list_messages(session.id) if m.message.role == "assistant"]
        counts[session.key] = (len(answers), len(answers))
    return counts


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_a_restart_completes_the_memory_work_of_every_answered_turn(
    tmp_path: Path, upstream: ScriptedUpstream, stop: signal.Signals
) -> None:
    stopped_and_resumed(tmp_path / "home", "", upstream, stop)


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

    again = {**MEMORY, "MEMLANE_MEMORY_BATCH_QUIET_SECONDS": "0", "MEMLANE_LOG_LEVEL": "info"}
    restarted = start_replica(home, store_url, upstream.url, env_overrides=again)
    try:
        store = open_store(settings)
        deadline = time.monotonic() + 60
        while (done := entries(store)) != answered:
            assert time.monotonic() < deadline, f"{done}\n{restarted.log.read_text()}"
            time.sleep(0.2)
        time.sleep(0.5)  # the marks move once each batch is done
        assert pending_turns(Runtime(settings, store)) == []  # a next start resumes nothing
        store.close()
    finally:
        restarted.process.terminate()
        restarted.process.wait(30)
    total = sum(turns for turns, _ in answered.values())
    resumed = f"resumed the memory work of {total} turn(s) in {SESSIONS} session(s)"
    assert resumed in restarted.log.read_text()
