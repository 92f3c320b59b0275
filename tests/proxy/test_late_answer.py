"""An answer is stored just after its client has it, and never out of order or twice.

A client that resends its history may send the session's next turn the moment the
answer's last byte arrives, on another connection; that turn waits for the answer to
be stored first. The admin API reads what a client was answered. An answer that took
the upstream a while is stored once the next request has gone upstream instead.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import httpx
import pytest

from memlane.engine import turnorder
from memlane.engine.turn import Answer
from memlane.proxy import answers, turns
from memlane.proxy.wire import WireAdapter
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
def test_the_next_turn_sent_at_once_finds_the_answer_stored_once(
    mproxy: RunningProxy, upstream: ScriptedUpstream, stream: bool
) -> None:
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


def test_the_admin_api_reads_what_a_client_was_answered(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
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


def test_an_answer_is_read_for_storing_only_once_its_client_has_it(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the upstream's answer into messages is storing work: not in front of the
    client. Here reading it waits until the client has its answer (a read in front of
    the response would wait in vain, and fail the test)."""
    received = threading.Event()
    waited: list[bool] = []
    read_answer = turns.read_answer

    def after_the_client(adapter: WireAdapter, content: bytes) -> Answer:
        waited.append(received.wait(10))
        return read_answer(adapter, content)

    monkeypatch.setattr(turns, "read_answer", after_the_client)
    upstream.script(Reply(text="the answer"))
    history = [{"role": "user", "content": "a question"}]
    assert ask(mproxy, history, stream=False) == "the answer"
    received.set()

    session = mproxy.store.find_session(KEY)
    assert session is not None
    stored = [m.message.text for m in mproxy.store.list_messages(session.id)]
    assert stored == ["a question", "the answer"]
    assert waited == [True]


def stored_texts(proxy: RunningProxy, key: str = KEY) -> list[str]:
    """What the store holds now (`proxy.store` would first ask for every answer held)."""
    store = proxy.runtime.store
    session = store.find_session(key)
    return [] if session is None else [m.message.text for m in store.list_messages(session.id)]


@pytest.mark.parametrize("stream", [False, True])
def test_a_slow_answer_is_stored_once_the_next_request_has_gone_upstream(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Storing it while the next request is shaped would slow that request down."""
    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", 30)  # only a turn asks for it
    monkeypatch.setattr(answers, "SENT_SECONDS", 0.3)
    slow = answers.PUT_OFF_AFTER_MS / 1000 * 2
    seen_upstream: list[list[str]] = []

    def answer(request: object) -> Reply:
        seen_upstream.append(stored_texts(mproxy))  # when the next request arrives
        # answered once the put-off answer is asked for (as a real model's would be)
        return Reply(text=f"answer {len(seen_upstream)}", latency=answers.SENT_SECONDS + 0.3)

    upstream.script(Reply(text="answer 0", latency=slow))
    history = [{"role": "user", "content": "question 0"}]
    history.append({"role": "assistant", "content": ask(mproxy, history, stream=stream)})
    history.append({"role": "user", "content": "question 1"})
    upstream.respond_with(answer)
    assert ask(mproxy, history, stream=stream) == "answer 1"

    assert seen_upstream == [["question 0"]]  # put off until the next request went upstream
    assert stored_soon(mproxy, count=3) == ["question 0", "answer 0", "question 1"]  # once
    mproxy.settled()  # the admin API, a test or `sessions_routes` asks for the last one
    assert stored_texts(mproxy) == ["question 0", "answer 0", "question 1", "answer 1"]


def test_a_slow_answer_is_stored_within_the_grace_or_when_the_admin_api_reads_it(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", 0.5)
    slow = Reply(text="answer 0", latency=answers.PUT_OFF_AFTER_MS / 1000 * 2)
    upstream.script(slow)
    ask(mproxy, [{"role": "user", "content": "question 0"}], stream=False)
    assert stored_texts(mproxy) == ["question 0"]
    time.sleep(1)
    assert stored_texts(mproxy) == ["question 0", "answer 0"]

    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", 30)
    upstream.script(replace(slow, text="answer 1"))
    history = [
        {"role": "user", "content": "question 0"},
        {"role": "assistant", "content": "answer 0"},
    ]
    ask(mproxy, [*history, {"role": "user", "content": "question 1"}], stream=False)
    with httpx.Client(timeout=10) as client:
        found = client.get(f"{mproxy.base}/v1/memlane/sessions/{KEY}/export", headers=mproxy.admin)
    lines = [json.loads(line) for line in found.text.splitlines()]
    exported = [line["message"] for line in lines if line["type"] == "message"]
    assert [m["role"] for m in exported] == ["user", "assistant"] * 2
    assert "answer 1" in json.dumps(exported[-1])


def stored_soon(proxy: RunningProxy, key: str = KEY, *, count: int = 2) -> list[str]:
    deadline = time.monotonic() + 5
    while len(stored_texts(proxy, key)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return stored_texts(proxy, key)


def test_a_quick_answer_is_stored_at_once(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next answer may come back before a put-off store would be done: not put off."""
    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", 30)
    upstream.script(Reply(text="answer 0"))
    ask(mproxy, [{"role": "user", "content": "question 0"}], stream=False)
    assert stored_soon(mproxy) == ["question 0", "answer 0"]


def test_an_answer_is_stored_at_once_while_another_is_put_off(
    mproxy: RunningProxy, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load put-off stores would only queue up: one at a time."""
    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", 30)
    slow = answers.PUT_OFF_AFTER_MS / 1000 * 2
    upstream.script(Reply(text="answer 0", latency=slow), Reply(text="answer 1", latency=slow))
    ask(mproxy, [{"role": "user", "content": "question 0"}], stream=False)
    ask(mproxy, [{"role": "user", "content": "question 1"}], stream=True, key="other")
    assert stored_soon(mproxy, "other") == ["question 1", "answer 1"]
    assert stored_texts(mproxy) == ["question 0"]  # the first is still put off
