"""The upstream clients: requests take the pools in turn; an injected transport gets one;
shared by every user of the proxy, they carry nobody's state."""

from __future__ import annotations

import httpx

from memlane.config import Settings
from memlane.proxy.forward import POOL_SHARDS, Upstream


async def test_requests_take_the_pools_in_turn_and_all_are_closed(settings: Settings) -> None:
    upstream = Upstream(settings)
    taken = [upstream.client for _ in range(2 * POOL_SHARDS)]
    assert len({id(client) for client in taken}) == POOL_SHARDS
    assert taken[:POOL_SHARDS] == taken[POOL_SHARDS:]
    await upstream.aclose()
    assert all(client.is_closed for client in taken)


async def test_an_injected_transport_serves_every_request(settings: Settings) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json={"data": []})

    upstream = Upstream(settings, transport=httpx.MockTransport(answer))
    assert upstream.client is upstream.client
    response = await upstream.client.get(upstream.url("/models"))
    assert response.json() == {"data": []}
    assert seen == [httpx.URL(upstream.url("/models")).path]
    await upstream.aclose()


async def test_cookies_set_by_the_upstream_never_travel_with_the_next_request(
    settings: Settings,
) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, headers={"set-cookie": "session=alice; Path=/"}, json={})

    upstream = Upstream(settings, transport=httpx.MockTransport(handler))
    try:
        for _ in range(2):
            await upstream.client.post(upstream.url("/chat/completions"), json={})
    finally:
        await upstream.aclose()
    assert seen == [None, None]
