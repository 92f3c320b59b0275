"""The upstream client: shared by every user of the proxy, it carries nobody's state; it
reuses its connections; it forwards the client's header bytes; a streamed answer comes as
it arrives; a dead or silent upstream is an `UpstreamError` that says which."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from memlane.config import Settings
from memlane.proxy.forward import (
    LARGE_BODY,
    Upstream,
    UpstreamError,
    UpstreamTimeout,
    relayed_headers,
)
from memlane.text import http_session
from tests.support.loopback import Served, loopback_socket, serve
from tests.support.raw_http import RawServer


class Recorder:
    """A loopback server that sets a cookie on every answer and records what it was sent."""

    def __init__(self) -> None:
        self.cookies: list[str | None] = []
        self.peers: list[int] = []
        self.headers: list[list[tuple[bytes, bytes]]] = []
        self.released = threading.Event()
        self.app = Starlette(
            routes=[
                Route("/v1/echo", self.echo, methods=["POST", "GET"]),
                Route("/v1/slow", self.slow, methods=["POST"]),
                Route("/v1/stream", self.stream, methods=["POST"]),
            ]
        )

    async def echo(self, request: Request) -> Response:
        self.cookies.append(request.headers.get("cookie"))
        self.peers.append(request.client.port if request.client else 0)
        self.headers.append(list(request.headers.raw))
        body = await request.body()
        response = JSONResponse({"got": body.decode()})
        response.set_cookie("session", "alice")
        return response

    async def slow(self, request: Request) -> Response:
        await asyncio.sleep(1)
        return JSONResponse({})

    async def stream(self, request: Request) -> Response:
        async def events() -> AsyncIterator[bytes]:
            yield b"data: 0\n\n"
            await asyncio.to_thread(self.released.wait, 10)  # the rest once the client read it
            yield b"data: 1\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    server = Recorder()
    served: Served = serve(
        uvicorn.Config(server.app, log_level="warning", lifespan="off"), name="recorder"
    )
    try:
        yield server, f"http://127.0.0.1:{served.port}/v1"
    finally:
        served.stop(5)


def upstream_at(settings: Settings, url: str, **changes: object) -> Upstream:
    return Upstream(settings.model_copy(update={"upstream_url": url, **changes}))


async def test_cookies_set_by_the_upstream_never_travel_with_the_next_request(
    settings: Settings, recorder: tuple[Recorder, str]
) -> None:
    server, url = recorder
    upstream = upstream_at(settings, url)
    try:
        for _ in range(2):
            answer = await upstream.send("POST", upstream.url("/echo"), b"{}", {})
            assert answer.status_code == 200
    finally:
        await upstream.aclose()
    assert server.cookies == [None, None]


async def test_one_connection_serves_requests_in_turn(
    settings: Settings, recorder: tuple[Recorder, str]
) -> None:
    server, url = recorder
    upstream = upstream_at(settings, url)
    try:
        for n in range(3):
            answer = await upstream.send("POST", upstream.url("/echo"), f'"{n}"'.encode(), {})
            assert answer.content == f'{{"got":"\\"{n}\\""}}'.encode()
    finally:
        await upstream.aclose()
    assert len(set(server.peers)) == 1


async def test_client_header_bytes_go_upstream_as_sent_and_memlane_s_own_stay_here(
    settings: Settings, recorder: tuple[Recorder, str]
) -> None:
    server, url = recorder
    upstream = upstream_at(settings, url)
    incoming = [
        (b"authorization", b"Bearer sk-client"),
        (b"x-title", "fix — now".encode()),
        (b"x-odd", b"caf\xe9"),  # not UTF-8: replaced, never refused
        (b"x-memlane-session", b"mine"),
        (b"host", b"127.0.0.1:1"),
    ]
    try:
        await upstream.send("POST", upstream.url("/echo"), b"{}", upstream.headers(incoming))
    finally:
        await upstream.aclose()
    sent = dict(server.headers[0])
    assert sent[b"authorization"] == b"Bearer sk-client"
    assert sent[b"x-title"] == "fix — now".encode()
    assert sent[b"x-odd"] == "caf\ufffd".encode()
    assert b"x-memlane-session" not in sent
    assert sent[b"host"] != b"127.0.0.1:1"
    assert sent[b"accept-encoding"] == b"identity"
    assert b"memlane-" in sent[b"via"]


async def test_a_streamed_answer_is_read_as_it_arrives(
    settings: Settings, recorder: tuple[Recorder, str]
) -> None:
    server, url = recorder
    upstream = upstream_at(settings, url)
    try:
        answer = await upstream.send("POST", upstream.url("/stream"), b"{}", {}, stream=True)
        chunks = answer.aiter_bytes()
        assert await anext(chunks) == b"data: 0\n\n"  # before the upstream sent the rest
        server.released.set()
        assert [chunk async for chunk in chunks] == [b"data: 1\n\n"]
        await answer.aclose()
    finally:
        server.released.set()
        await upstream.aclose()


async def test_a_silent_upstream_is_a_timeout_and_a_dead_one_an_error(
    settings: Settings, recorder: tuple[Recorder, str]
) -> None:
    _, url = recorder
    upstream = upstream_at(settings, url, upstream_timeout=0.3)
    try:
        with pytest.raises(UpstreamTimeout):
            await upstream.send("POST", upstream.url("/slow"), b"{}", {})
    finally:
        await upstream.aclose()
    with loopback_socket() as sock:  # bound, not listening: the connection is refused
        port = sock.getsockname()[1]
        dead = upstream_at(settings, f"http://127.0.0.1:{port}/v1")
        try:
            with pytest.raises(UpstreamError) as refused:
                await dead.send("POST", dead.url("/echo"), b"{}", {})
        finally:
            await dead.aclose()
    assert not isinstance(refused.value, UpstreamTimeout)
    assert refused.value.reason


async def test_a_request_whose_connection_broke_before_the_answer_is_sent_once_more(
    settings: Settings,
) -> None:
    """Under load the proxy may reuse a kept-alive connection the upstream is closing:
    the request is sent once more, its whole body again, on a new connection, instead of
    failing the client with a 502."""
    server = RawServer(reset_reused=True)
    upstream = upstream_at(settings, await server.start())
    large = b"x" * (8 * LARGE_BODY)  # still being written when the reset comes
    try:
        first = await upstream.send("POST", upstream.url("/echo"), b"{}", {})
        again = await upstream.send("POST", upstream.url("/echo"), large, {})
    finally:
        await upstream.aclose()
        await server.stop()
    assert first.content == again.content == b'{"ok":true}'
    assert server.resets == 1
    assert server.answered == [2, len(large)]


async def test_a_connection_that_breaks_again_is_an_error_after_one_more_try(
    settings: Settings,
) -> None:
    server = RawServer(broken=True)
    upstream = upstream_at(settings, await server.start())
    try:
        with pytest.raises(UpstreamError) as broke:
            await upstream.send("POST", upstream.url("/echo"), b"{}", {})
    finally:
        await upstream.aclose()
        await server.stop()
    assert server.resets == 2  # the request and its one retry, no more
    assert server.answered == []
    assert not isinstance(broke.value, UpstreamTimeout)


async def test_a_connection_cut_after_the_upstream_worked_on_it_is_not_sent_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A break that comes late (the upstream read the request and worked on it, then the
    connection was cut, as a load balancer's idle timeout does) is the error it is:
    sending it again would pay for the answer twice and double the client's wait."""
    monkeypatch.setattr(http_session, "BROKE_AT_ONCE_SECONDS", 0.1)
    server = RawServer(reset_after=0.3)
    upstream = upstream_at(settings, await server.start())
    try:
        with pytest.raises(UpstreamError):
            await upstream.send("POST", upstream.url("/echo"), b"{}", {})
    finally:
        await upstream.aclose()
        await server.stop()
    assert server.resets == 1


def test_relayed_headers_drop_per_connection_ones_and_keep_the_upstream_s_bytes() -> None:
    upstream = {
        "content-type": "application/json",
        "content-length": "12",
        "x-request-id": "req_1",
        "x-note": "caf\udce9",  # how an HTTP parser hands on a byte that is not UTF-8
    }
    relayed = relayed_headers(upstream)
    assert relayed == {
        "content-type": "application/json",
        "x-request-id": "req_1",
        "x-note": "caf\xe9",
    }
    assert relayed["x-note"].encode("latin-1") == b"caf\xe9"
