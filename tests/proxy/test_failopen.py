"""Memory never breaks a request: whatever fails inside memlane, the upstream's answer arrives."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane.config import Settings
from memlane.engine.failopen import EVENT
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from tests.proxy.conftest import QUIET, sdk, stored
from tests.support.upstream import Fail, ProxyFactory, Raw, Reply, ScriptedUpstream


class BrokenSearch(SQLiteStore):
    """A store whose keyword index is broken: every search raises, everything else works."""

    def keyword_search(self, *args: Any, **kwargs: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")


def test_a_recall_that_raises_forwards_without_memories_and_records_why(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path / "h",
        upstream_url=upstream.url,
        embedding_backend="hashing",
        index_enabled=False,
        memory_extract_facts=False,
    )
    settings.home_path.mkdir()
    store = BrokenSearch(settings.database_path)
    proxy = proxy_factory(runtime=Runtime(settings, store))
    answer = sdk(proxy, "s1").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "what did I say about tabs?"}]
    )
    assert answer.choices[0].message.content == "echo: what did I say about tabs?"
    session = proxy.store.find_session("s1")  # once the turn is stored
    assert session is not None
    (event,) = store.list_events(session.id, kind=EVENT)
    assert event.payload["stage"] == "recall"
    assert "malformed" in event.payload["error"]
    status = httpx.get(f"{proxy.base}/v1/memlane/status", headers=proxy.admin).json()
    assert status["failures"]["recall"]["count"] == 1


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_deeply_nested_body_is_a_400_in_the_wire_format(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, path: str
) -> None:
    proxy = proxy_factory(**QUIET)
    body = b"[" * 50_000 + b"]" * 50_000
    response = httpx.post(
        f"{proxy.url}{path}",
        content=body,
        headers={"content-type": "application/json", "x-memlane-session": "deep"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert "Traceback" not in response.text
    assert proxy.store.find_session("deep") is None
    assert upstream.model_requests == []


CHAT_FRAMES = (
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"Hel"}}]}\n\n',
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    '"delta":{"content":"lo"},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":{"cached":3},"completion_tokens":"many"}}\n\n',
    "data: [DONE]\n\n",
)


def test_odd_usage_in_a_stream_is_relayed_and_the_answer_stored(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    upstream.script(Raw(frames=CHAT_FRAMES))
    with httpx.stream(
        "POST",
        f"{proxy.url}/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-memlane-session": "odd"},
    ) as response:
        relayed = b"".join(response.iter_bytes())
    assert response.status_code == 200
    assert relayed == "".join(CHAT_FRAMES).encode()
    proxy.drain()
    assert [row[3] for row in stored(proxy, "odd")] == ["hi", "Hello"]


RESPONSES_FRAMES = (
    'event: response.created\ndata: {"type":"response.created","response":{"id":"r1"}}\n\n',
    'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
    '"output_index":0,"item":{"role":"assistant"}}\n\n',
    'event: response.failed\ndata: {"type":"response.failed","response":null}\n\n',
)


def test_a_failed_response_with_null_body_is_relayed_and_marks_the_turn_failed(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    upstream.script(Raw(frames=RESPONSES_FRAMES))
    with httpx.stream(
        "POST",
        f"{proxy.url}/responses",
        json={"model": "m", "stream": True, "input": "hi"},
        headers={"x-memlane-session": "nullfail"},
    ) as response:
        relayed = b"".join(response.iter_bytes())
    assert response.status_code == 200
    assert relayed == "".join(RESPONSES_FRAMES).encode()
    proxy.drain()
    rows = stored(proxy, "nullfail")
    assert [(row[3], row[4]) for row in rows] == [("hi", "failed")]


def test_an_output_item_without_a_type_keeps_the_rest_of_the_answer(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    good = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    body = {
        "id": "resp_x",
        "object": "response",
        "status": "completed",
        "output": [{"role": 7}, good],
        "usage": {"input_tokens": [1], "output_tokens": 2},
    }
    upstream.script(Raw(body=body))
    response = httpx.post(
        f"{proxy.url}/responses",
        json={"model": "m", "input": "hi"},
        headers={"x-memlane-session": "untyped"},
    )
    assert response.status_code == 200
    assert response.json() == body
    assert [row[3] for row in stored(proxy, "untyped")] == ["hi", "ok"]


def test_memlanes_own_calls_borrow_the_requests_key_and_never_keep_it(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.engine.memory.extract import FACT_PROMPT

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    key = "sk-client-secret-4242"
    proxy = proxy_factory(index_enabled=False)

    def answer(request: Any) -> Reply | None:
        if request.messages and request.messages[0].get("content") == FACT_PROMPT:
            return Reply(text='["The user prefers tabs"]')
        return None

    upstream.respond_with(answer)
    httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "I prefer tabs"}]},
        headers={"authorization": f"Bearer {key}", "x-memlane-session": "k"},
    ).raise_for_status()
    proxy.drain()
    own = [r for r in upstream.model_requests if r.messages[0].get("content") == FACT_PROMPT]
    assert own, "memlane made no extraction call"
    assert {r.headers.get("authorization") for r in own} == {f"Bearer {key}"}
    facts = proxy.store.list_facts(roles=("memory",))
    assert [f.text for f in facts] == ["The user prefers tabs"]
    home = proxy.settings.home_path
    for path in home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_a_refused_own_call_is_recorded_with_the_fix_and_never_the_key(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.engine.memory.extract import FACT_PROMPT

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    key = "sk-client-wrong-7777"
    proxy = proxy_factory(index_enabled=False)

    def refuse(request: Any) -> Fail | None:
        if request.messages and request.messages[0].get("content") == FACT_PROMPT:
            return Fail(401, f"Incorrect API key provided: {key}", "invalid_request_error")
        return None

    upstream.respond_with(refuse)
    answer = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "I prefer tabs"}]},
        headers={"authorization": f"Bearer {key}", "x-memlane-session": "refused"},
    )
    assert answer.status_code == 200
    proxy.drain()
    session = proxy.store.find_session("refused")
    (event,) = proxy.store.list_events(session.id, kind=EVENT)
    assert (event.payload["stage"], event.payload["type"]) == ("extraction", "refused")
    assert "HTTP 401" in event.payload["error"]
    assert "MEMLANE_LLM_API_KEY" in event.payload["error"]
    assert key not in json.dumps(event.payload)


def test_memory_work_under_back_pressure_waits_and_is_done_not_dropped(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """A full queue (no room for a job, no room for a turn's text) keeps the turn's work as
    its session's key, counted in the status as pending; it is done once there is room."""
    proxy = proxy_factory(memory_extract_facts=False, memory_batch_turns=1)  # due at once
    background = proxy.runtime.background
    background.max_pending, background.max_batched = 0, 0  # a queue that is always full
    answer = sdk(proxy, "full").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "I live in Lisbon"}]
    )
    assert answer.choices[0].message.content == "echo: I live in Lisbon"  # the request is served
    proxy.settled()
    status = httpx.get(f"{proxy.base}/v1/memlane/status", headers=proxy.admin).json()
    assert status["background_pending"] >= 1
    background.max_pending, background.max_batched = 512, 8192  # room again
    proxy.drain()
    status = httpx.get(f"{proxy.base}/v1/memlane/status", headers=proxy.admin).json()
    assert (status["background_dropped"], status["background_pending"]) == (0, 0)
    turns = proxy.store.list_facts(roles=("user",))
    assert [t.text for t in turns] == ["I live in Lisbon"]  # re-read from the store
