"""No request waits on memlane forever: a store write that never returns, a leaked hold.

Every wait memlane makes on a request's behalf is bounded by `request_wait_seconds`
(`engine.waits`); past it the request goes on, answered as usual, and the overrun is
recorded on the runtime's activity (the `wait` stage).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.store import open_store
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream

WAIT = 0.5
CLIENT_SECONDS = 15.0
"""Far past `WAIT`: a client that times out here was left waiting on memlane."""


def stuck_writes(store: Any, names: tuple[str, ...], until: threading.Event) -> None:
    """Make the store's `names` writes hang until `until` is set (a disk that stalls, a
    lock some other process holds): they return only at the test's end."""
    for name in names:
        original: Callable[..., Any] = getattr(store, name)

        def stalled(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            until.wait(60)
            return _original(*args, **kwargs)

        setattr(store, name, stalled)


def proxy_with_stuck_store(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    tmp_path: Path,
    until: threading.Event,
    **overrides: Any,
) -> RunningProxy:
    settings = Settings(
        home=tmp_path / "home",
        upstream_url=upstream.url,
        embedding_backend="hashing",
        memory_enabled=False,
        index_enabled=False,
        request_wait_seconds=WAIT,
        **overrides,
    )
    settings.home_path.mkdir(parents=True, exist_ok=True)
    store = open_store(settings)
    stuck_writes(store, ("sync_messages", "append_messages"), until)
    return proxy_factory(runtime=Runtime(settings, store))


def ask(proxy: RunningProxy, messages: list[dict[str, str]], *, stream: bool) -> str:
    body = {"model": "m", "messages": messages, "stream": stream}
    headers = {"X-Memlane-Session": "stuck", "X-Memlane-History": "server"}
    with httpx.Client(timeout=CLIENT_SECONDS) as client:
        if not stream:
            answer = client.post(f"{proxy.url}/chat/completions", json=body, headers=headers)
            answer.raise_for_status()
            return str(answer.json()["choices"][0]["message"]["content"])
        text = ""
        with client.stream(
            "POST", f"{proxy.url}/chat/completions", json=body, headers=headers
        ) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if line.startswith("data: {"):
                    for choice in json.loads(line[6:])["choices"]:
                        text += choice.get("delta", {}).get("content") or ""
        return text


@pytest.mark.parametrize("stream", [False, True])
def test_a_store_write_that_never_returns_leaves_no_client_waiting(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    tmp_path: Path,
    unblock: threading.Event,
    stream: bool,
) -> None:
    proxy = proxy_with_stuck_store(proxy_factory, upstream, tmp_path, unblock)
    upstream.script(Reply(text="first answer"), Reply(text="second answer"))

    # memlane supplies this client's history, so its messages are stored before it is
    # shaped: that store never returns, and the request goes on without it
    assert ask(proxy, [{"role": "user", "content": "hello"}], stream=stream) == "first answer"
    assert ask(proxy, [{"role": "user", "content": "again"}], stream=stream) == "second answer"

    failures = proxy.runtime.activity.snapshot()["failures"]
    assert failures["wait"]["count"] >= 2
    assert "MEMLANE_REQUEST_WAIT_SECONDS" in failures["wait"]["last"]
    forwarded = [r.json["messages"][-1]["content"] for r in upstream.model_requests]
    assert forwarded == ["hello", "again"]  # forwarded as sent


def test_the_next_turn_after_a_stuck_store_is_answered(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    tmp_path: Path,
    unblock: threading.Event,
) -> None:
    """A client that resends its history, under concurrent requests: the turn's store never
    returns, its answer waits for it, and the session's next turn waits for both."""
    # with workers, another process may take the session's next turn: the answer waits
    proxy = proxy_with_stuck_store(proxy_factory, upstream, tmp_path, unblock, workers=2)
    history = [{"role": "user", "content": "one"}]
    body = {"model": "m", "messages": history}
    with httpx.Client(timeout=CLIENT_SECONDS) as client:
        first = client.post(
            f"{proxy.url}/chat/completions", json=body, headers={"X-Memlane-Session": "s"}
        )
        first.raise_for_status()
        history += [
            {"role": "assistant", "content": first.json()["choices"][0]["message"]["content"]},
            {"role": "user", "content": "two"},
        ]
        second = client.post(
            f"{proxy.url}/chat/completions",
            json={"model": "m", "messages": history},
            headers={"X-Memlane-Session": "s"},
        )
        second.raise_for_status()
    assert proxy.runtime.activity.snapshot()["failures"]["wait"]["count"] >= 2
