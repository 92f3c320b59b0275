"""Bad input and a failing upstream: an OpenAI error with the right status, nothing half-stored."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import openai
import pytest

from tests.proxy.conftest import QUIET, sdk, stored
from tests.support.upstream import (
    ContextLengthExceeded,
    CutStream,
    Fail,
    Hang,
    Reply,
    RunningProxy,
    ScriptedUpstream,
)

CHAT = [{"role": "user", "content": "hello"}]


def post(proxy: RunningProxy, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"x-memlane-session": "bad", **kwargs.pop("headers", {})}
    return httpx.post(f"{proxy.url}{path}", headers=headers, timeout=30, **kwargs)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert {"message", "type", "param", "code"} <= set(body["error"])
    return dict(body["error"])


USER_X = '[{"role": "user", "content": "x"}]'
BAD_BODIES = [
    ("/chat/completions", '{"model": "m", "messages": [', None),
    ("/chat/completions", "\udcff not json", None),
    ("/chat/completions", '["a", "list"]', "body"),
    ("/chat/completions", '{"model": "m", "messages": "hello"}', "messages"),
    ("/chat/completions", '{"model": 5, "messages": ' + USER_X + "}", "model"),
    ("/chat/completions", '{"messages": [{"role": "user", "content": 42}]}', "messages[0].content"),
    ("/chat/completions", '{"messages": [{"role": "boss", "content": "x"}]}', "messages[0].role"),
    ("/chat/completions", '{"stream": "yes", "messages": ' + USER_X + "}", "stream"),
    ("/responses", '{"model": "m", "input": 42}', "input"),
    ("/responses", '{"model": "m", "input": [42]}', "input[0]"),
    ("/responses", '{"model": "m", "input": "x", "instructions": ["no"]}', "instructions"),
]


@pytest.mark.parametrize(("path", "text", "param"), BAD_BODIES)
def test_bad_input_is_a_400_and_stores_nothing(
    mproxy: RunningProxy, upstream: ScriptedUpstream, path: str, text: str, param: str | None
) -> None:
    content = text.encode("utf-8", "surrogateescape")
    response = post(mproxy, path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert mproxy.store.list_sessions() == []
    assert upstream.requests == []


def test_body_over_the_limit_is_a_413(mproxy: RunningProxy, upstream: ScriptedUpstream) -> None:
    huge = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 50_000_000}]})
    response = post(mproxy, "/chat/completions", content=huge.encode())
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert mproxy.store.list_sessions() == []
    assert upstream.requests == []
    assert post(mproxy, "/chat/completions", json={"messages": CHAT}).status_code == 200


def test_a_smaller_configured_limit_applies(proxy_factory: Any) -> None:
    proxy = proxy_factory(max_body_bytes=1000, **QUIET)
    body = {"messages": [{"role": "user", "content": "y" * 2000}]}
    assert post(proxy, "/chat/completions", json=body).status_code == 413


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assert_failed_turn(proxy: RunningProxy, key: str = "bad") -> None:
    """The user turn is kept (nothing is lost) but marked failed, and no assistant row exists."""
    rows = stored(proxy, key)
    assert [(r[0], r[4]) for r in rows] == [("user", "failed")]


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_is_a_502(proxy_factory: Any, stream: bool) -> None:
    proxy = proxy_factory(upstream_url=f"http://127.0.0.1:{free_port()}/v1", **QUIET)
    response = post(proxy, "/chat/completions", json={"messages": CHAT, "stream": stream})
    assert response.status_code == 502
    assert error_of(response)["code"] == "upstream_unavailable"
    message = error_of(response)["message"]
    assert "cannot connect: connection refused; is it running" in message
    assert "Client" not in message  # no class name of the HTTP client library
    assert_failed_turn(proxy)
    assert httpx.get(f"{proxy.base}/health").status_code == 200


def test_upstream_timeout_is_a_504_and_the_retry_succeeds(
    proxy_factory: Any, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(upstream_timeout=0.5, **QUIET)
    upstream.script(Hang(seconds=5))
    response = post(proxy, "/chat/completions", json={"messages": CHAT})
    assert response.status_code == 504
    assert error_of(response)["code"] == "upstream_timeout"
    assert_failed_turn(proxy)
    assert post(proxy, "/chat/completions", json={"messages": CHAT}).status_code == 200
    rows = stored(proxy, "bad")
    assert [(r[0], r[4]) for r in rows] == [("user", "failed"), ("user", "ok"), ("assistant", "ok")]


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_500_is_relayed_as_an_openai_error(
    mproxy: RunningProxy, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.script(Fail(500, "the model crashed"))
    with pytest.raises(openai.InternalServerError) as caught:
        sdk(mproxy, "bad").chat.completions.create(model="m", messages=CHAT, stream=stream)
    assert "the model crashed" in str(caught.value)
    assert_failed_turn(mproxy)


def test_non_json_upstream_error_is_wrapped(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Fail(503, raw_body="<html>Service Unavailable</html>"))
    response = post(mproxy, "/chat/completions", json={"messages": CHAT})
    assert response.status_code == 503
    error = error_of(response)
    assert error["code"] == "upstream_503"
    assert "Service Unavailable" in error["message"]


def test_context_length_exceeded_keeps_its_code(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(ContextLengthExceeded())
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(mproxy, "bad").responses.create(model="m", input="hello")
    assert caught.value.code == "context_length_exceeded"
    assert_failed_turn(mproxy)


def test_chat_stream_cut_midway_ends_with_an_error_and_no_partial_answer(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(CutStream(after=3))
    stream = sdk(mproxy, "bad").chat.completions.create(model="m", messages=CHAT, stream=True)
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert "before the answer was complete" in str(caught.value)
    assert_failed_turn(mproxy)
    assert sdk(mproxy, "bad").chat.completions.create(model="m", messages=CHAT).choices


def test_responses_stream_cut_midway_ends_with_an_error_event(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(CutStream(after=4))
    body = {"model": "m", "input": "hello", "stream": True}
    with httpx.stream(
        "POST", f"{mproxy.url}/responses", json=body, headers={"x-memlane-session": "bad"}
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[-2] == "event: error"
    assert json.loads(lines[-1].removeprefix("data: "))["code"] == "upstream_stream_error"
    assert_failed_turn(mproxy)


def test_non_streamed_body_cut_midway_is_a_502(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(CutStream())
    response = post(mproxy, "/chat/completions", json={"messages": CHAT})
    assert response.status_code == 502
    assert "its answer broke off before the end" in error_of(response)["message"]
    assert_failed_turn(mproxy)


def test_a_client_that_leaves_once_it_has_the_whole_answer_keeps_its_turn(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    """Clients hang up on a stream's last event (Codex CLI does); an upstream still to close
    its stream then must not make the answer they have a failed turn, which their next
    request would store again."""
    upstream.script(Reply(text="all of it", linger=5.0))
    body = {"messages": CHAT, "stream": True}
    headers = {"x-memlane-session": "left"}
    with httpx.stream("POST", f"{mproxy.url}/chat/completions", json=body, headers=headers) as r:
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if line == "data: [DONE]":
                break  # the whole answer is here: the client leaves
    assert "data: [DONE]" in lines
    deadline = time.monotonic() + 10
    while not upstream.stream_outcomes and time.monotonic() < deadline:
        time.sleep(0.02)
    assert upstream.stream_outcomes == ["aborted"]  # the upstream call was cancelled
    mproxy.drain()
    rows = stored(mproxy, "left")
    assert [(r[0], r[3], r[4]) for r in rows] == [
        ("user", CHAT[-1]["content"], "ok"),
        ("assistant", "all of it", "ok"),
    ]


def test_client_disconnect_cancels_the_upstream_stream(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="word " * 200, chunk_size=5, delay=0.05))
    body = {"messages": CHAT, "stream": True}
    with httpx.stream(
        "POST", f"{mproxy.url}/chat/completions", json=body, headers={"x-memlane-session": "bad"}
    ) as response:
        next(response.iter_bytes())  # the first bytes arrive, then the client leaves
    deadline = time.monotonic() + 10
    while not upstream.stream_outcomes and time.monotonic() < deadline:
        time.sleep(0.02)
    assert upstream.stream_outcomes == ["aborted"]
    while stored(mproxy, "bad")[0][4] == "ok" and time.monotonic() < deadline:
        time.sleep(0.02)  # the failure is recorded as the relay unwinds
    assert_failed_turn(mproxy)


def test_a_base_url_without_v1_is_told_where_the_route_is(proxy: RunningProxy) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    response = httpx.post(f"{proxy.base}/chat/completions", json=body, timeout=30)
    assert response.status_code == 404
    error = error_of(response)
    assert error["type"] == "not_found"
    assert "memlane serves it at /v1/chat/completions" in error["message"]
    assert f"{proxy.base}/v1" in error["message"]
    other = error_of(httpx.get(f"{proxy.base}/nothing-here", timeout=30))
    assert "memlane's API is under /v1/" in other["message"]
    assert proxy.store.list_sessions() == []  # nothing stored
