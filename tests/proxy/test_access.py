"""One access line per request, without bodies or credentials; upstream errors are warnings."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from tests.proxy.conftest import QUIET
from tests.support.upstream import Fail, ProxyFactory, ScriptedUpstream

LINE_WAIT = 10.0


def access_records(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The access lines, once `count` are there: a line is written when the answer has been
    sent, so the client may hold its response a moment before the server logs it."""
    deadline = time.monotonic() + LINE_WAIT
    while True:
        lines = [r for r in caplog.records if r.name == "memlane.access"]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)


def test_each_request_gets_one_line_and_no_secret(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = proxy_factory(**QUIET)
    caplog.set_level(logging.INFO, logger="memlane.access")
    headers = {"authorization": "Bearer sk-secret-in-header", "x-memlane-session": "logged"}
    body = {"model": "m", "messages": [{"role": "user", "content": "a private prompt"}]}
    answer = httpx.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
    answer.raise_for_status()
    lines = access_records(caplog, 1)
    assert len(lines) == 1
    text = lines[0].getMessage()
    session = proxy.store.find_session("logged")
    assert text.startswith("POST /v1/chat/completions 200 ")
    tokens, limit, _ = (p.split("=")[1] for p in answer.headers["x-memlane-context"].split("; "))
    # the upstream's status, and what governance forwarded, for clients that show no headers
    assert text.endswith(
        f"session {session.id[:8]} upstream 200 context {tokens}/{int(limit):,} tokens"
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
    lines = access_records(caplog, 2)
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
    lines = [r.getMessage() for r in access_records(caplog, 2)]
    assert all(line.endswith("upstream -") for line in lines), lines
    assert upstream.model_requests == []
