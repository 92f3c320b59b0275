"""An answer is stored in the store's writer as its client gets it, never out of order or
twice.

A client that resends its history may send the session's next turn the moment the
answer's last byte arrives, on another connection; that turn finds the answer's write
queued before its own (a stream's as its last event is relayed, a whole answer's as its
last byte is handed on: `engine.writes`, `pipeline.finish_after_sending`). The admin API
reads what a client was answered.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from memlane.engine import turn_store
from memlane.engine.turn import Answer
from memlane.proxy import turns
from memlane.proxy.access import AccessLog
from memlane.proxy.wire import WireAdapter
from memlane.store.group_commit import GroupCommit
from tests.support.upstream import Reply, RunningProxy, ScriptedUpstream

KEY = "late-answer"


def ask(proxy: RunningProxy, history: list[dict[str, str]], *, stream: bool, key: str = KEY) -> str:
    """One request on a connection of its own; the answer's text."""
    body = {"model": "m", "messages": history, "stream": stream}
    headers = {"X-Memlane-Session": key, "authorization": "Bearer sk-client"}
    with httpx.Client(timeout=30) as client:
        if not stream:
            answer = client.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
            return str(answer.json()["choices"][0]["message"]["content"])
        text = ""
        with client.stream(
            "POST", f"{proxy.url}/chat/completions", json=body, headers=headers
        ) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: {"):
                    for choice in json.loads(line[6:])["choices"]:
                        text += choice.get("delta", {}).get("content") or ""
        return text


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("storing", ["quick", "slow"])
def test_the_next_turn_sent_at_once_finds_the_answer_stored_once(
    mproxy: RunningProxy,
    upstream: ScriptedUpstream,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
    storing: str,
) -> None:
    """`slow`: each answer's write takes a while in the store's writer, so the next turn
    arrives before it is done and must wait for it."""
    if storing == "slow":
        slow_answers(monkeypatch, 0.1)
    history: list[dict[str, str]] = []
    for turn in range(6):
        upstream.script(Reply(text=f"answer {turn}"))
        history.append({"role": "user", "content": f"question {turn}"})
        history.append({"role": "assistant", "content": ask(mproxy, history, stream=stream)})

    session = mproxy.store.find_session(KEY)
    assert session is not None
    stored = [
        (m.message.role, m.message.text)
        for m in mproxy.store.list_messages(session.id, include_superseded=True)
        if m.message.origin == "client"
    ]
    assert stored == [(item["role"], item["content"]) for item in history]


def slow_answers(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Each answer's write takes `seconds` in the store's writer."""
    store_answer = turn_store.store_answer

    def slowly(*args: Any) -> None:
        time.sleep(seconds)
        store_answer(*args)

    monkeypatch.setattr(turn_store, "store_answer", slowly)


def test_the_admin_api_reads_what_a_client_was_answered(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the answer's write is still under way as the client reads it back."""
    slow_answers(monkeypatch, 0.2)

    def answered_then_exported(turn: int) -> list[str]:
        key = f"{KEY}-{turn}"
        upstream_body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        with httpx.Client(timeout=30) as client:
            client.post(
                f"{mproxy.url}/chat/completions",
                json=upstream_body,
                headers={"X-Memlane-Session": key},
            )
            found = client.get(
                f"{mproxy.base}/v1/memlane/sessions/{key}/export", headers=mproxy.admin
            )
        return [json.loads(line).get("type") for line in found.text.splitlines()]

    upstream.respond_with(lambda request: Reply(text="hello"))
    with ThreadPoolExecutor(4) as pool:
        exports = list(pool.map(answered_then_exported, range(8)))
    assert all(types[:3] == ["session", "message", "message"] for types in exports), exports


def test_an_answer_is_read_for_storing_in_the_stores_writer(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the upstream's answer into messages is storing work: not on the event loop,
    in front of the client, but in the writer that stores it."""
    read_in: list[str] = []
    read_answer = turns.read_answer

    def where(adapter: WireAdapter, content: bytes) -> Answer:
        read_in.append(threading.current_thread().name)
        return read_answer(adapter, content)

    monkeypatch.setattr(turns, "read_answer", where)
    upstream.script(Reply(text="the answer"))
    history = [{"role": "user", "content": "a question"}]
    assert ask(mproxy, history, stream=False) == "the answer"

    session = mproxy.store.find_session(KEY)
    assert session is not None
    stored = [m.message.text for m in mproxy.store.list_messages(session.id)]
    assert stored == ["a question", "the answer"]
    assert read_in == ["memlane-writer"]


def test_an_answer_the_client_resends_is_queued_once_its_last_byte_is_handed_on(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queued just before it, the store's writer woke while the answer was being sent and
    took the GIL from the event loop. A non-streamed answer the client resends, whose next
    turn this process takes, is queued after its access line, which is written as its last
    byte is handed on (`proxy.access`), and before the loop runs anything else: a request
    the client sends once it has the answer (its next turn, a read of the session) finds
    it queued."""
    events: list[str] = []
    submit, line = GroupCommit.submit, AccessLog._line

    def queued(self: GroupCommit, write: Any, done: Any, *, linger: bool = False) -> None:
        events.append(getattr(write, "__qualname__", ""))
        submit(self, write, done, linger=linger)

    def logged(self: AccessLog, *args: Any) -> None:
        events.append("line")
        asyncio.get_running_loop().call_soon(events.append, "the loop's next step")
        line(self, *args)

    monkeypatch.setattr(GroupCommit, "submit", queued)
    monkeypatch.setattr(AccessLog, "_line", logged)
    for turn in range(3):  # the first request counts its tokens as it is answered
        upstream.script(Reply(text=f"answer {turn}"))
        history = [{"role": "user", "content": f"question {turn}"}]
        assert ask(mproxy, history, stream=False, key=f"{KEY}-{turn}") == f"answer {turn}"
        # The client can read the last byte before the proxy's loop runs its next step.
        deadline = time.monotonic() + 10
        while events.count("the loop's next step") <= turn and time.monotonic() < deadline:
            time.sleep(0.005)

    answer = "queue_answer.<locals>.write"  # the answer's write (`engine.pipeline`)
    marks = [e for e in events if e in ("line", answer, "the loop's next step")]
    assert marks == ["line", answer, "the loop's next step"] * 3
    session = mproxy.store.find_session(f"{KEY}-2")
    assert session is not None
    assert [m.message.text for m in mproxy.store.list_messages(session.id)] == [
        "question 2",
        "answer 2",
    ]
