"""Context governance through the running proxy, against the scripted upstream."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from memlane.engine.governance.budget import LEARNED_PREFIX
from memlane.engine.governance.ledger import EVENT_DROPPED, PLAN_STATE
from tests.proxy.conftest import QUIET
from tests.support.upstream import (
    ContextLengthExceeded,
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
)

MODEL = "tiny-model"
SMALL = {
    **QUIET,
    "scaffold_clients": "all",
    "governance_context_windows": {MODEL: 4_096},
    "governance_safety_margin": 256,
    "governance_tool_output_limit": 200,
    "governance_protect_tokens": 600,
    "governance_summary_max_tokens": 200,
    "governance_recall_chars": 800,
}


def post(proxy: RunningProxy, body: dict[str, Any], session: str = "gov") -> httpx.Response:
    return httpx.post(
        f"{proxy.url}/chat/completions",
        json=body,
        headers={"x-memlane-session": session},
        timeout=30,
    )


def words(n: int, seed: int) -> str:
    return " ".join(f"w{(seed * 7919 + i * 104729) % 100_003}" for i in range(n))


def history(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Build it. The config file is conf/app.toml."},
        {"role": "assistant", "content": "Started; config is conf/app.toml."},
    ]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"step": step})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": words(250, step)})
    return messages


def summaries(request: RecordedRequest) -> Reply | None:
    body = request.json or {}
    last = (body.get("messages") or [{}])[-1].get("content") or ""
    if isinstance(last, str) and "<removed_messages>" in last:
        return Reply(text="<state_snapshot>goal: build it; config conf/app.toml</state_snapshot>")
    return None


def test_a_request_that_cannot_fit_is_refused_before_the_upstream(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    body = {"model": MODEL, "messages": [{"role": "user", "content": words(6_000, 1)}]}
    response = post(proxy, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "4096-token context window" in error["message"]
    assert upstream.model_requests == []


def test_a_long_history_is_compacted_and_the_next_request_only_appends(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    messages = history(40)
    messages.append({"role": "user", "content": "Where is the config file?"})
    first = post(proxy, {"model": MODEL, "messages": messages})
    assert first.status_code == 200, first.text
    forwarded = [r for r in upstream.model_requests if summaries(r) is None]
    sent = forwarded[-1].json["messages"]
    assert len(json.dumps(sent)) < len(json.dumps(messages)) / 3
    assert any("conf/app.toml" in (m.get("content") or "") for m in sent[3:6])
    # the question stays the last message: any recall of dropped history goes before it
    assert sent[-1] == {"role": "user", "content": "Where is the config file?"}
    recalled = [i for i, m in enumerate(sent) if "<memlane_recall>" in str(m["content"])]
    assert recalled in ([], [len(sent) - 2])
    before_recall = len(sent) - 1 - len(recalled)
    summary_calls = len(upstream.model_requests) - len(forwarded)
    assert summary_calls == 1

    messages += [
        {"role": "assistant", "content": "It is conf/app.toml."},
        {"role": "user", "content": "Thanks, carry on."},
    ]
    second = post(proxy, {"model": MODEL, "messages": messages})
    assert second.status_code == 200
    again = upstream.model_requests[-1].json["messages"]
    assert len(upstream.model_requests) == len(forwarded) + summary_calls + 1  # no new summary
    assert again[:before_recall] == sent[:before_recall]  # the prefix is byte-stable
    asked = again.index(messages[-1])
    assert not [m for m in again[asked:] if "<memlane_recall>" in str(m["content"])]
    session = proxy.store.find_session("gov")
    assert PLAN_STATE in proxy.store.get_state(session.id)


def test_recalled_history_says_when_it_was_said(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    messages = history(40)
    first = post(proxy, {"model": MODEL, "messages": messages}, session="when")
    assert first.status_code == 200, first.text
    messages += [
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "What did the run of step 7 return?"},
    ]
    second = post(proxy, {"model": MODEL, "messages": messages}, session="when")
    assert second.status_code == 200, second.text
    session = proxy.store.find_session("when")
    assert session is not None
    said = {m.created_at for m in proxy.store.list_messages(session.id)}
    dropped = proxy.store.list_events(session.id, kind=EVENT_DROPPED)
    assert dropped
    assert {e.created_at for e in dropped} <= said  # dated when said, not when dropped
    forwarded = upstream.model_requests[-1].json["messages"]
    (recalled,) = [m["content"] for m in forwarded if "<memlane_recall>" in str(m["content"])]
    stamps = re.findall(r'<snippet at="(\d{4}-\d\d-\d\d \d\d:\d\d) UTC">', recalled)
    assert stamps
    assert set(stamps) <= {f"{moment:%Y-%m-%d %H:%M}" for moment in said}


def test_an_upstream_overflow_teaches_the_window(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**{**QUIET, "scaffold_clients": "all"})
    upstream.script(
        ContextLengthExceeded(
            "This model's maximum context length is 2048 tokens. However, your messages "
            "resulted in 3100 tokens."
        )
    )
    body = {"model": "local-llm", "messages": [{"role": "user", "content": words(900, 2)}]}
    response = post(proxy, body, session="learn")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert proxy.store.get_meta(LEARNED_PREFIX + "local-llm") == "2048"
    # the next request is checked against the learned window before it leaves
    bigger = {"model": "local-llm", "messages": [{"role": "user", "content": words(3_000, 3)}]}
    refused = post(proxy, bigger, session="learn2")
    assert refused.status_code == 400
    assert "2048-token context window" in refused.json()["error"]["message"]
    assert len(upstream.model_requests) == 1


def test_manual_compaction_and_offloaded_outputs_over_http(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    messages = history(40)
    messages.append({"role": "user", "content": "Where is the config file?"})
    assert post(proxy, {"model": MODEL, "messages": messages}, session="manual").status_code == 200
    session = proxy.store.find_session("manual")
    admin = f"{proxy.url}/memlane/sessions/{session.id}"
    done = httpx.post(f"{admin}/compact", json={}, timeout=30, headers=proxy.admin)
    assert done.status_code == 200, done.text
    data = done.json()
    assert data["object"] == "memlane.compaction"
    assert data["model"] == MODEL  # the session's own model
    assert data["tokens_after"] <= data["tokens_before"]
    outputs = httpx.get(f"{admin}/tool-outputs", timeout=30, headers=proxy.admin).json()["data"]
    assert outputs
    first = outputs[0]
    full = httpx.get(f"{admin}/tool-outputs/{first['id']}", timeout=30, headers=proxy.admin)
    assert full.status_code == 200
    assert full.text == messages[first["index"]]["content"]
    missing = httpx.get(f"{admin}/tool-outputs/999999", timeout=30, headers=proxy.admin)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "output_not_found"
    unknown = httpx.post(
        f"{proxy.url}/memlane/sessions/nope/compact", timeout=30, headers=proxy.admin
    )
    assert unknown.status_code == 404


def test_a_plain_client_is_governed_too(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    from tests.test_governance import small_window_session

    proxy = proxy_factory(**QUIET)  # default client settings: governance for every client
    messages = small_window_session(40)
    response = httpx.post(  # raw HTTP: no X-Stainless-* headers, not an agentic client
        f"{proxy.url}/chat/completions",
        json={"model": "gpt-4", "messages": messages},
        headers={"x-memlane-session": "plain"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    sent = upstream.last.messages
    assert len(sent) < len(messages)
    assert sent[-1]["content"] == "What should you do next?"
    assert "<memlane_state>" not in json.dumps(sent)  # no scaffold for a plain client


def test_every_governed_response_says_what_was_forwarded(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    from tests.test_governance import small_window_session

    proxy = proxy_factory(**QUIET)
    small = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]},
    )
    tokens, limit, compacted = (
        part.split("=")[1] for part in small.headers["x-memlane-context"].split("; ")
    )
    assert int(tokens) < 50
    assert int(limit) > 4000
    assert compacted == "0"
    for stream in (False, True):
        big = httpx.post(
            f"{proxy.url}/chat/completions",
            json={"model": "gpt-4", "messages": small_window_session(30), "stream": stream},
            headers={"x-memlane-session": f"big-{stream}"},
            timeout=30,
        )
        assert big.headers["x-memlane-context"].endswith("compacted=1")


def screenshot(n: int) -> dict[str, Any]:
    """A user turn with a screenshot: a data URL of a few bytes whose cost is its pixels'."""
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f"What is wrong in screenshot {n}?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }


def test_images_count_as_what_a_provider_charges_and_old_ones_are_compacted(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """An image's text is `[image]`; counted as that, a session of screenshots was sent
    whole until the upstream refused it, then every turn after."""
    proxy = proxy_factory(**{**SMALL, "governance_context_windows": {MODEL: 8_192}})
    upstream.respond_with(summaries)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You review UIs."}]
    for n in range(8):
        messages += [screenshot(n)]
        answer = post(proxy, {"model": MODEL, "messages": messages})
        assert answer.status_code == 200, answer.text
        messages += [{"role": "assistant", "content": f"Screenshot {n} looks fine."}]
    forwarded = [r for r in upstream.model_requests if summaries(r) is None]
    images = [json.dumps(r.json["messages"]).count('"type": "image_url"') for r in forwarded]
    assert images[:3] == [1, 2, 3]  # fits while the window holds them
    assert max(images) <= 8_192 // 1_600  # never more than the window can take
    assert images[-1] >= 1
    assert json.dumps(forwarded[-1].json["messages"][-1]) == json.dumps(messages[-2])


def test_a_head_that_leaves_no_room_beside_a_long_system_prompt_goes_too(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """The first turn is kept for the session's life; beside a system prompt close to the
    budget it took every request over it, each refused before the upstream."""
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": words(1_150, 3)},
        {"role": "user", "content": "Start here: " + words(120, 4)},
        {"role": "assistant", "content": "Started. " + words(120, 5)},
    ]
    for n in range(12):
        messages += [
            {"role": "user", "content": f"Step {n}: " + words(30, 10 + n)},
            {"role": "assistant", "content": f"Done {n}."},
        ]
    messages.append({"role": "user", "content": "Next?"})
    answer = post(proxy, {"model": MODEL, "messages": messages})
    assert answer.status_code == 200, answer.text
    sent = [r for r in upstream.model_requests if summaries(r) is None][-1].json["messages"]
    assert sent[0] == messages[0]  # the instructions stay
    assert sent[-1] == {"role": "user", "content": "Next?"}
    assert messages[1] not in sent  # the head went, summarised with the middle
    messages += [
        {"role": "assistant", "content": "Step 12 next."},
        {"role": "user", "content": "Go."},
    ]
    assert post(proxy, {"model": MODEL, "messages": messages}).status_code == 200  # and after
