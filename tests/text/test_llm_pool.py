"""The runtime's pool of aiohttp sessions for memlane's own LLM calls: one connection
reused across calls (each still with its own key), one session per event loop."""

from __future__ import annotations

import asyncio
import json

from memlane.text.llm import REQUEST_KEY, ClientPool, LentKey, OpenAICompatibleLLM
from tests.support.raw_http import RawServer
from tests.support.upstream import ScriptedUpstream
from tests.text.test_llm import HI, KEY, completion_body


async def test_a_client_pool_reuses_one_connection_and_still_sends_each_calls_key() -> None:
    server = RawServer(json.dumps(completion_body()).encode())
    url = await server.start()
    pool = ClientPool()
    try:
        pooled = OpenAICompatibleLLM(url, api_key=KEY, default_model="m", clients=pool)
        for _ in range(3):
            await pooled.complete([{"role": "user", "content": "Hi"}])
        assert server.connections == 1
        borrowing = OpenAICompatibleLLM(
            url, default_model="m", borrow_request_key=True, clients=pool
        )
        token = REQUEST_KEY.set(LentKey("openai", {"authorization": "Bearer sk-client-key"}))
        try:
            await borrowing.complete([{"role": "user", "content": "Hi"}])
        finally:
            REQUEST_KEY.reset(token)
        await borrowing.complete([{"role": "user", "content": "Hi"}])  # no key to borrow now
        assert server.connections == 1
        assert server.authorizations == [f"Bearer {KEY}"] * 3 + ["Bearer sk-client-key", ""]
        single = OpenAICompatibleLLM(url, api_key=KEY, default_model="m")
        for _ in range(2):
            await single.complete([{"role": "user", "content": "Hi"}])
        assert server.connections == 3  # without a pool, each call opens its own
    finally:
        await pool.aclose()
        await server.stop()


async def test_a_pooled_connection_the_server_closed_under_a_call_is_tried_once_more() -> None:
    """A kept-alive connection the server resets under the next call (its idle timeout
    reached as the pool handed it out): the call is sent once more on a new connection,
    not failed (a failed call drops the memory work of its batch)."""
    server = RawServer(json.dumps(completion_body()).encode(), reset_reused=True)
    url = await server.start()
    pool = ClientPool()
    try:
        pooled = OpenAICompatibleLLM(url, api_key=KEY, default_model="m", clients=pool)
        for _ in range(2):
            answer = await pooled.complete([{"role": "user", "content": "Hi"}])
            assert answer.text
    finally:
        await pool.aclose()
        await server.stop()
    assert server.resets == 1
    assert server.connections == 2
    assert len(server.answered) == 2


def test_each_event_loop_gets_its_own_session(upstream: ScriptedUpstream) -> None:
    pool = ClientPool()
    llm = OpenAICompatibleLLM(upstream.url, api_key=KEY, default_model="m", clients=pool)
    loops = [asyncio.new_event_loop() for _ in range(2)]
    try:
        sessions = []
        for loop in loops * 2:  # each loop twice: its session kept between its calls

            async def call() -> None:
                await llm.complete(HI)
                sessions.append(pool.session())

            loop.run_until_complete(call())
        first, second, first_again, second_again = sessions
        assert first is first_again
        assert second is second_again
        assert first is not second
        assert len(upstream.requests) == 4
        for loop in loops:
            loop.run_until_complete(pool.aclose())
        assert first.closed
        assert second.closed
    finally:
        for loop in loops:
            loop.close()
