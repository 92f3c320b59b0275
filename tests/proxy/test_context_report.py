"""Governance shows its work: the next request by part, and each compaction, for any client."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memlane.cli.app import app
from memlane.engine.governance.recall import RECALL_HEADER
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

AGENT = {"user-agent": "codex_cli_rs/0.50.0"}
QUESTION = "Which port does the staging database listen on?"


def session_with_a_dropped_fact(steps: int = 40) -> list[dict[str, Any]]:
    """An agentic session far over an 8k window; a figure said early, asked about last."""
    words = " ".join(f"w{i % 97}" for i in range(700))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Migrate the staging setup."},
        {"role": "assistant", "content": "On it."},
    ]
    for i in range(steps):
        if i == 3:
            messages.append(
                {"role": "user", "content": "The staging database listens on port 6432."}
            )
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"cmd": f"step {i}"})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i}: {words}"},
            {"role": "assistant", "content": f"step {i} went fine"},
        ]
    messages.append({"role": "user", "content": QUESTION})
    return messages


def snapshots(request: RecordedRequest) -> Reply | None:
    last = (request.messages or [{}])[-1].get("content") or ""
    if isinstance(last, str) and "<removed_messages>" in last:
        return Reply(text="<state_snapshot>goal: migrate the staging setup</state_snapshot>")
    return None


def post(proxy_url: str, messages: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(
        f"{proxy_url}/chat/completions",
        json={"model": "gpt-4", "messages": messages},
        headers={"x-memlane-session": "ctx", **AGENT},
        timeout=60,
    )


def part_of(message: dict[str, Any]) -> str:
    text = str(message.get("content") or "")
    if text.startswith("[memlane: summary of"):
        return "snapshot"
    if text.startswith(RECALL_HEADER):
        return "snippets"
    if text.startswith("<memlane_state>"):
        return "scaffold"
    return "history"


def test_the_context_report_is_what_the_next_request_forwards(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = proxy_factory(**QUIET)
    upstream.respond_with(snapshots)
    messages = session_with_a_dropped_fact()
    first = post(proxy.url, messages)
    assert first.status_code == 200, first.text
    assert first.headers["x-memlane-context"].endswith("compacted=1")
    session = proxy.store.find_session("ctx")

    report = httpx.get(
        f"{proxy.url}/memlane/sessions/{session.id}/context", headers=proxy.admin, timeout=30
    )
    assert report.status_code == 200, report.text
    data = report.json()
    assert data["object"] == "memlane.context"
    assert (data["model"], data["window"], data["history"]) == ("gpt-4", 8_192, "client")
    parts = data["parts"]
    assert parts["snapshot"]["items"] == 1
    assert parts["head"]["items"] == 3  # the instructions and the first run
    assert parts["tail"]["tokens"] > parts["head"]["tokens"]
    assert parts["scaffold"]["items"] == 1  # the new anchor (summary.md) goes out next
    assert parts["snippets"]["items"] == 1
    assert parts["memories"] == {"tokens": 0, "items": 0}  # long-term memory is off here
    (event,) = data["events"]
    assert event["tokens_before"] > data["threshold"] >= data["target"] >= event["tokens_after"]
    assert event["newly_dropped"] > 20
    assert event["stands_for"] == "summary"
    assert event["snapshot"] == "goal: migrate the staging setup"

    # the next request resends the history with the answer: it is exactly what was reported
    answer = first.json()["choices"][0]["message"]["content"]
    again = post(proxy.url, [*messages, {"role": "assistant", "content": answer}])
    tokens = int(again.headers["x-memlane-context"].split(";")[0].split("=")[1])
    assert tokens == data["total"]
    sent = upstream.model_requests[-1].messages
    counted = {name: 0 for name in ("snapshot", "snippets", "scaffold", "history")}
    for message in sent:
        counted[part_of(message)] += 1
    assert counted == {
        "snapshot": parts["snapshot"]["items"],
        "snippets": parts["snippets"]["items"],
        "scaffold": parts["scaffold"]["items"],
        "history": parts["head"]["items"] + parts["tail"]["items"],
    }
    recalled = next(m for m in sent if part_of(m) == "snippets")
    assert "port 6432" in recalled["content"]

    # the CLI prints the same figures for the same home
    now = httpx.get(
        f"{proxy.url}/memlane/sessions/{session.id}/context", headers=proxy.admin, timeout=30
    ).json()
    assert now["total"] > tokens  # the second answer is stored; the anchor block is no news
    monkeypatch.setenv("MEMLANE_HOME", str(proxy.settings.home_path))
    result = CliRunner().invoke(app, ["sessions", "context", "ctx", "--json"])
    assert result.exit_code == 0, result.stderr
    assert {"object": "memlane.context", **json.loads(result.stdout)} == now
    text = CliRunner().invoke(app, ["sessions", "context", session.id[:12]])
    assert text.exit_code == 0, text.stderr
    assert f"next request: {now['total']:,} tokens" in text.stdout
    assert "re-injected snippets" in text.stdout
    assert f"{event['tokens_before']:,} -> {event['tokens_after']:,} tokens" in text.stdout
    missing = CliRunner().invoke(app, ["sessions", "context", "no-such-session"])
    assert missing.exit_code == 1
    assert "no-such-session" in missing.stderr


def test_a_server_history_session_reports_its_working_context(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    client = sdk(proxy, "bot", **{"X-Memlane-History": "server"})
    for i in range(3):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": f"q{i}"}]
        )
    session = proxy.store.find_session("bot")
    data = httpx.get(
        f"{proxy.url}/memlane/sessions/{session.id}/context", headers=proxy.admin, timeout=30
    ).json()
    assert data["history"] == "server"
    assert data["model"] == "gpt-4o"
    assert data["parts"]["head"]["items"] + data["parts"]["tail"]["items"] == 6
    unknown = httpx.get(
        f"{proxy.url}/memlane/sessions/nope/context", headers=proxy.admin, timeout=30
    )
    assert unknown.status_code == 404


@pytest.mark.parametrize("stream", [False, True])
def test_responses_answers_carry_the_context_header_and_the_access_line_repeats_it(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    caplog: pytest.LogCaptureFixture,
    stream: bool,
) -> None:
    from tests.engine.governance.helpers import agentic

    proxy = proxy_factory(**QUIET)
    caplog.set_level(logging.INFO, logger="memlane.access")
    items = list(agentic("responses", 60).items)
    with httpx.stream(
        "POST",
        f"{proxy.url}/responses",
        json={"model": "gpt-4", "input": items, "stream": stream},
        headers={"x-memlane-session": f"resp-{stream}", **AGENT},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        body = response.read()
    assert (b"response.completed" in body) == stream
    fields = dict(p.split("=") for p in response.headers["x-memlane-context"].split("; "))
    assert fields["compacted"] == "1"
    assert int(fields["tokens"]) <= int(fields["limit"]) == 8_192 - 2_048
    lines: list[str] = []
    for _ in range(100):  # a stream's line is written once its last byte has gone out
        lines = [r.getMessage() for r in caplog.records if r.name == "memlane.access"]
        if lines:
            break
        time.sleep(0.05)
    (line,) = lines
    assert line.endswith(f"context {int(fields['tokens']):,}/6,144 tokens, compacted")
