"""One access line per request, without bodies or credentials; upstream errors are warnings."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from memlane.proxy.access import AccessLog
from tests.proxy.conftest import QUIET
from tests.support.upstream import Fail, ProxyFactory, ScriptedUpstream


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "memlane.access"]


def test_each_request_gets_one_line_and_no_secret(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = proxy_factory(**QUIET)
    caplog.set_level(logging.INFO, logger="memlane.access")
    headers = {"authorization": "Bearer sk-secret-in-header", "x-memlane-session": "logged"}
    body = {"model": "m", "messages": [{"role": "user", "content": "a private prompt"}]}
    answer = httpx.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
    answer.raise_for_status()
    lines = access_records(caplog)  # no wait: the line is written before the last byte
    assert len(lines) == 1
    text = lines[0].getMessage()
    session = proxy.store.find_session("logged")
    assert text.startswith("POST /v1/chat/completions 200 ")
    tokens, limit, _ = (p.split("=")[1] for p in answer.headers["x-memlane-context"].split("; "))
    # the upstream's status, and what governance forwarded, for clients that show no headers
    assert text.endswith(
        f"session {session.id[:8]} namespace default upstream 200 "
        f"context {tokens}/{int(limit):,} tokens"
    )
    assert lines[0].levelno == logging.INFO
    assert "sk-secret" not in caplog.text
    assert "private prompt" not in caplog.text


def test_an_upstream_error_is_a_warning_at_most_once_per_burst(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = proxy_factory(**QUIET)
    caplog.set_level(logging.INFO, logger="memlane.access")
    upstream.script(Fail(502, "bad gateway"), Fail(502, "bad gateway"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):
        assert httpx.post(f"{proxy.url}/chat/completions", json=body).status_code == 502
    lines = access_records(caplog)
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO]
    assert all(r.getMessage().endswith("upstream 502") for r in lines)  # the upstream's fault


def test_a_request_memlane_answers_itself_names_no_upstream_status(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = proxy_factory(**QUIET)
    caplog.set_level(logging.INFO, logger="memlane.access")
    body = {"model": "m", "messages": [{"role": "user", "content": "like @@nothing-here"}]}
    assert httpx.post(f"{proxy.url}/chat/completions", json=body).status_code == 200
    assert httpx.get(f"{proxy.base}/health").status_code == 200
    lines = [r.getMessage() for r in access_records(caplog)]
    assert all(line.endswith("upstream -") for line in lines), lines
    assert upstream.model_requests == []


async def test_the_line_is_written_before_the_last_byte_is_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that read its whole answer finds the line (and the count) already there."""
    caplog.set_level(logging.INFO, logger="memlane.access")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    lines_when_sent: list[tuple[bool, int]] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            written = [r for r in caplog.records if r.name == "memlane.access"]
            lines_when_sent.append((bool(message.get("more_body")), len(written)))

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "state": {}}
    await AccessLog(app, runtime_of=lambda: None)(scope, receive, send)
    assert lines_when_sent == [(True, 0), (False, 1)]
    assert len([r for r in caplog.records if r.name == "memlane.access"]) == 1
