"""A PostgreSQL store gone away mid-run: each of its calls waits for a connection that
never comes. The request still has its answer within `request_wait_seconds` of
memlane's own waiting, in all, not per wait; and no store call holds the event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.proxy.conftest import ask
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream

WAIT = 1.0
"""`request_wait_seconds` here."""


def hung(back: threading.Event) -> Callable[..., Any]:
    """A store call against a server that accepts and never answers (released at the end)."""

    def waiting(*args: Any, **kwargs: Any) -> Any:
        back.wait(30)
        raise RuntimeError("the store came back too late")

    return waiting


@pytest.fixture
def down_proxy(
    proxy_factory: ProxyFactory,
    pg_url: str,
    unblock: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> RunningProxy:
    running = proxy_factory(
        store_url=pg_url, request_wait_seconds=WAIT, memory_enabled=False, index_enabled=False
    )
    store = running.runtime.store
    for name in ("find_session_state", "get_meta", "get_state", "transaction", "batch"):
        monkeypatch.setattr(store, name, hung(unblock))
    running.runtime.windows._read.clear()  # the next turn reads its window from the store
    return running


def test_a_request_waits_on_a_store_gone_away_at_most_request_wait_seconds_in_all(
    down_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """Its session read, its governance, its answer's store (another process may take
    the session's next turn) each waited its own 5 s, and governance read the model's
    window on the event loop: QA saw 10-30 s with a 5 s setting."""
    upstream.script(Reply(text="answered all the same"), Reply(text="and again"))
    for question in ("are you there?", "still there?"):
        started = time.monotonic()
        said = ask(down_proxy, "outage", [{"role": "user", "content": question}], stream=False)
        took = time.monotonic() - started
        assert said in ("answered all the same", "and again")
        assert took < WAIT + 0.8, f"answered after {took:.1f} s"
    assert upstream.model_requests[-1].json["messages"][-1]["content"] == "still there?"


def test_the_event_loop_serves_others_while_a_request_waits_on_the_store(
    down_proxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="answered"))
    asking = threading.Thread(
        target=ask,
        args=(down_proxy, "outage", [{"role": "user", "content": "hi"}]),
        kwargs={"stream": False},
    )
    asking.start()
    time.sleep(WAIT / 2)  # the request is in memlane's hands, its store calls hung
    started = time.monotonic()
    assert httpx.get(f"{down_proxy.base}/health", timeout=10).status_code == 200
    assert time.monotonic() - started < 0.5
    asking.join(10)
