"""Fixtures for the proxy's tests: a proxy whose own background LLM work is off.

memlane's memory and session-index stages call the same scripted upstream in
the background; the proxy's tests assert on exactly what the client's requests
forwarded, so those stages are switched off here (they have their own tests).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.proxy.test_replicas import Replica
from tests.support.upstream import ProxyFactory, RunningProxy, closing

QUIET: dict[str, Any] = {"memory_enabled": False, "index_enabled": False}


@pytest.fixture
def mproxy(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory(**QUIET)


def sdk(proxy: RunningProxy, session: str | None = None, **headers: str) -> openai.OpenAI:
    extra = {"X-Memlane-Session": session} if session else {}
    extra.update(headers)
    return closing(
        openai.OpenAI(base_url=proxy.url, api_key="sk-client", max_retries=0, default_headers=extra)
    )


def async_sdk(proxy: RunningProxy, session: str | None = None) -> openai.AsyncOpenAI:
    extra = {"X-Memlane-Session": session} if session else {}
    return openai.AsyncOpenAI(
        base_url=proxy.url, api_key="sk-client", max_retries=0, default_headers=extra
    )


def ask(
    proxy: RunningProxy, key: str, history: list[dict[str, str]], *, stream: bool, **more: str
) -> str:
    """The answer to a Chat Completions request in session `key` (with headers `more`),
    over raw HTTP; streamed, the stream as read to its end."""
    body = {"model": "m", "messages": history, "stream": stream}
    headers = {"X-Memlane-Session": key, **more}
    with httpx.Client(timeout=30) as client:
        if not stream:
            answer = client.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
            answer.raise_for_status()
            return str(answer.json()["choices"][0]["message"]["content"])
        with client.stream(
            "POST", f"{proxy.url}/chat/completions", json=body, headers=headers
        ) as answer:
            answer.raise_for_status()
            return "".join(answer.iter_text())


def stored(proxy: RunningProxy, key: str, **kwargs: Any) -> list[Any]:
    """(role, kind, origin, text, status) of the session's stored messages."""
    session = proxy.store.find_session(key)
    assert session is not None, f"no session {key!r} was stored"
    return [
        (m.message.role, m.message.kind, m.message.origin, m.message.text, m.status)
        for m in proxy.store.list_messages(session.id, **kwargs)
    ]


@pytest.fixture
def unblock() -> Iterator[threading.Event]:
    """Set at the test's end: store calls a test holds up (a store gone away, a slow
    write) end then, not with the proxy's threads still waiting on them."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def running() -> Iterator[list[Replica]]:
    """The `memlane serve` processes a test started; those still running at its end are
    killed."""
    started: list[Replica] = []
    yield started
    for replica in started:
        if replica.process.poll() is None:
            replica.process.kill()
            replica.process.wait(30)
