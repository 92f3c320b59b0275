"""A graceful stop bounds the requests in flight: past its grace each is answered, not dropped.

A real `memlane serve` process (SQLite, memory off so every upstream call is a client's)
gets SIGTERM while a client's request waits on an upstream that would take a minute.
With `MEMLANE_SHUTDOWN_GRACE_SECONDS=1` the process stops within seconds: a request not
answered yet gets a 503 in its client's wire format (the SDKs send it again), a stream
already begun ends with an error event, the turn is recorded as failed, and the
process exits 0 (the store closed as on any graceful stop). A connected MCP client's
event stream is ended, not broken.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anthropic
import httpx
import openai

from memlane.config import Settings
from memlane.store import open_store
from tests.proxy.test_replicas import Replica, start_replica
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.upstream import Hang, Reply, ScriptedUpstream

GRACE = {"MEMLANE_SHUTDOWN_GRACE_SECONDS": "1"}
STOPPED_WITHIN = 30.0
"""Far less than the upstream's minute, far more than a stop with a second of grace."""


def serve(home: Path, upstream_url: str, running: list[Replica], **env: str) -> Replica:
    replica = start_replica(home, "", upstream_url, env_overrides={**GRACE, **env})
    running.append(replica)
    return replica


def in_flight(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """`call()` in a thread; its result or the exception it raised, once it ends."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def stop(replica: Replica) -> int:
    replica.process.send_signal(signal.SIGTERM)
    return replica.process.wait(STOPPED_WITHIN)


def stopped_while_waiting(
    replica: Replica, arrived: Callable[[], bool], ask: Callable[[], object]
) -> object:
    """What `ask()` got once the replica was stopped while the request waited on its
    upstream, from the moment it `arrived` there (its result, or the exception it raised)."""
    thread, outcome = in_flight(ask)
    wait_for(arrived, "the request to reach the upstream")
    assert stop(replica) == 0, replica.log.read_text()
    thread.join(10)
    [got] = outcome
    return got


def stored_statuses(home: Path, key: str) -> list[tuple[str, str]]:
    store = open_store(Settings(home=home))
    try:
        session = store.find_session(key)
        assert session is not None, f"no session {key!r} was stored"
        return [(m.message.role, m.status) for m in store.list_messages(session.id)]
    finally:
        store.close()


def test_a_request_still_waiting_on_its_upstream_gets_a_503_once_the_grace_runs_out(
    tmp_path: Path, upstream: ScriptedUpstream, running: list[Replica]
) -> None:
    replica = serve(tmp_path / "home", upstream.url, running)
    upstream.script(Hang(seconds=60))
    client = openai.OpenAI(
        base_url=f"{replica.url}/v1",
        api_key="sk-client",
        max_retries=0,
        default_headers={"X-Memlane-Session": "cut"},
    )
    messages = [{"role": "user", "content": "take your time"}]
    error = stopped_while_waiting(
        replica,
        lambda: len(upstream.model_requests) == 1,
        lambda: client.chat.completions.create(model="m", messages=messages),
    )
    client.close()
    assert isinstance(error, openai.InternalServerError), error
    assert error.status_code == 503
    assert isinstance(error.body, dict)
    assert error.body["code"] == "memlane_stopping"
    assert "MEMLANE_SHUTDOWN_GRACE_SECONDS" in error.message
    assert stored_statuses(tmp_path / "home", "cut") == [("user", "failed")]


def test_a_stream_outlasting_the_grace_ends_with_an_error_event(
    tmp_path: Path, upstream: ScriptedUpstream, running: list[Replica]
) -> None:
    replica = serve(tmp_path / "home", upstream.url, running)
    upstream.script(Reply(text="one two three four", delay=60))  # then a minute per event
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
    headers = {"X-Memlane-Session": "cut-stream", "Authorization": "Bearer sk-client"}
    lines: list[str] = []
    begun = threading.Event()

    def read() -> None:
        with httpx.stream(
            "POST", f"{replica.url}/v1/chat/completions", json=body, headers=headers, timeout=60
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line:
                    lines.append(line)
                    begun.set()

    thread, outcome = in_flight(read)
    assert begun.wait(30)  # the first event reached the client; the next is a minute away
    assert stop(replica) == 0, replica.log.read_text()
    thread.join(10)
    assert outcome == [None]
    first = json.loads(lines[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]  # the stream had begun
    last = json.loads(lines[-1].removeprefix("data: "))
    assert last["error"]["code"] == "memlane_stopping"
    assert "data: [DONE]" not in lines
    assert upstream.stream_outcomes == ["aborted"]  # the upstream call was closed too
    assert "was cut by memlane's stop (MEMLANE_SHUTDOWN_GRACE_SECONDS)" in replica.log.read_text()
    assert stored_statuses(tmp_path / "home", "cut-stream") == [("user", "failed")]


def test_an_anthropic_client_is_told_in_its_own_error_shape(
    tmp_path: Path, anthropic_upstream: ScriptedAnthropic, running: list[Replica]
) -> None:
    anthropic_upstream.script(Hang(seconds=60))
    replica = serve(
        tmp_path / "home",
        "http://127.0.0.1:9/v1",  # unused: Messages go to the Anthropic upstream
        running,
        MEMLANE_ANTHROPIC_UPSTREAM_URL=anthropic_upstream.base,
    )
    client = anthropic.Anthropic(base_url=replica.url, api_key="sk-ant-client", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    error = stopped_while_waiting(
        replica,
        lambda: len(anthropic_upstream.requests) == 1,
        lambda: client.messages.create(model="claude-x", max_tokens=64, messages=messages),
    )
    client.close()
    assert isinstance(error, anthropic.InternalServerError), error
    assert error.status_code == 503
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert "MEMLANE_SHUTDOWN_GRACE_SECONDS" in error.body["error"]["message"]


def test_an_mcp_clients_event_stream_ends_cleanly_at_a_stop(
    tmp_path: Path, upstream: ScriptedUpstream, running: list[Replica]
) -> None:
    """A connected MCP client's event stream (`GET /mcp`) is ended, not broken, by a stop."""
    replica = serve(tmp_path / "home", upstream.url, running)
    token = (tmp_path / "home" / "admin_token").read_text(encoding="utf-8").strip()
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    opened = httpx.post(f"{replica.url}/mcp", json=hello, headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    streaming = threading.Event()

    def listen() -> str:
        stream_headers = {
            **headers,
            "accept": "text/event-stream",
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18",
        }
        with httpx.stream(
            "GET", f"{replica.url}/mcp", headers=stream_headers, timeout=60
        ) as response:
            assert response.status_code == 200
            streaming.set()
            for _ in response.iter_bytes():
                pass
        return "ended"

    thread, outcome = in_flight(listen)
    assert streaming.wait(30)
    time.sleep(0.3)  # the stream is the server's now, waiting for something to send
    assert stop(replica) == 0, replica.log.read_text()
    thread.join(10)
    assert outcome == ["ended"]  # not a RemoteProtocolError: the stream was ended
    assert "without completing response" not in replica.log.read_text()
