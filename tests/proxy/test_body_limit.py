"""The admin API, the inspector and `/mcp` are under the body limit the model routes have."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from tests.proxy.conftest import QUIET
from tests.proxy.test_admin import make_session
from tests.support.upstream import ProxyFactory

LIMIT = 1_000_000


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A JSON body of about `total` bytes, sent chunked (no Content-Length to trust)."""
    yield b'{"text": "'
    for _ in range(total // size):
        yield b"x" * size
    yield b'"}'


def test_a_pinned_text_over_the_limit_is_refused_with_413(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET, max_body_bytes=LIMIT)
    session = make_session(proxy, "pin")
    url = f"{proxy.url}/memlane/sessions/{session}/pinned"
    declared = httpx.put(url, json={"text": "x" * (2 * LIMIT)}, headers=proxy.admin, timeout=30)
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "request_too_large"
    streamed = httpx.put(url, content=chunks(3 * LIMIT), headers=proxy.admin, timeout=30)
    assert streamed.status_code == 413
    shown = httpx.get(f"{proxy.url}/memlane/sessions/{session}", headers=proxy.admin).json()
    assert not shown.get("pinned")  # nothing stored
    fits = httpx.put(url, json={"text": "Use UTC."}, headers=proxy.admin, timeout=30)
    assert fits.status_code == 200
    shown = httpx.get(f"{proxy.url}/memlane/sessions/{session}", headers=proxy.admin).json()
    assert shown["pinned"] == "Use UTC."


def test_the_inspector_and_mcp_are_under_the_limit_too(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET, max_body_bytes=LIMIT)
    big = b"a=" + b"x" * (2 * LIMIT)
    form = httpx.post(f"{proxy.base}/ui/login", content=big, timeout=30)
    assert form.status_code == 413
    mcp = httpx.post(f"{proxy.base}/mcp", content=chunks(2 * LIMIT), headers=proxy.admin)
    assert mcp.status_code == 413
