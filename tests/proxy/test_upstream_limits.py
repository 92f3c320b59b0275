"""An upstream that never finishes, or whose close-delimited stream is cut, ends the
client's request with an error event in its own wire format.

The scripted upstream here is a raw HTTP/1.1 server on loopback: it writes exactly the
bytes a misbehaving model server would (an SSE comment every fraction of a second; a
body without length or chunking that stops mid-event).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory

Behaviour = Callable[[socket.socket], None]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}],
}


def read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)


@contextlib.contextmanager
def raw_upstream(behaviour: Behaviour) -> Iterator[str]:
    """A one-request-at-a-time HTTP server on loopback answering with `behaviour`."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                read_request(conn)
                with contextlib.suppress(OSError):
                    behaviour(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def comments_for_ever(conn: socket.socket) -> None:
    conn.sendall(HEAD + b"data: " + json.dumps(CHUNK).encode() + b"\n\n")
    deadline = time.monotonic() + 60  # the test fails long before, were nothing to stop it
    while time.monotonic() < deadline:
        conn.sendall(b": keep-alive\n\n")
        time.sleep(0.1)


def cut_mid_event(conn: socket.socket) -> None:
    first = b"data: " + json.dumps(CHUNK).encode() + b"\n\n"
    conn.sendall(HEAD + first + b'data: {"id": "c1", "object": "chat.comp')


def events(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]


def ask(url: str) -> httpx.Response:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(
        f"{url}/chat/completions", json=body, headers={"x-memlane-session": "s"}, timeout=30
    )


@pytest.mark.parametrize("behaviour", [comments_for_ever, cut_mid_event])
def test_a_stream_that_never_ends_or_is_cut_ends_with_an_error_event(
    proxy_factory: ProxyFactory, behaviour: Behaviour
) -> None:
    with raw_upstream(behaviour) as url:
        proxy = proxy_factory(
            **QUIET, upstream_url=url, upstream_timeout=5.0, upstream_deadline=1.0
        )
        answer = ask(proxy.url)
    assert answer.status_code == 200
    sent = events(answer.text)
    assert json.loads(sent[0])["choices"][0]["delta"]["content"] == "Hel"
    last = json.loads(sent[-1])
    assert "before the answer was complete" in last["error"]["message"]
    session = proxy.store.find_session("s")
    assert session is not None


def whole_then_close(conn: socket.socket) -> None:
    done = dict(CHUNK, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    frames = [CHUNK, done]
    body = b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)
    conn.sendall(HEAD + body + b"data: [DONE]")  # no blank line after the last event


def test_a_whole_close_delimited_stream_is_relayed_without_an_error(
    proxy_factory: ProxyFactory,
) -> None:
    with raw_upstream(whole_then_close) as url:
        proxy = proxy_factory(**QUIET, upstream_url=url)
        answer = ask(proxy.url)
    sent = events(answer.text)
    assert sent[-1] == "[DONE]"
    assert not any("error" in event for event in sent)
