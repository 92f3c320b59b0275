"""The runtime's pool of aiohttp sessions for memlane's own LLM calls: one connection
reused across calls (each still with its own key), one session per event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json

from memlane.text.llm import REQUEST_KEY, ClientPool, LentKey, OpenAICompatibleLLM
from tests.support.upstream import ScriptedUpstream
from tests.text.test_llm import HI, KEY, completion_body


class _CountingServer:
    """A real HTTP/1.1 server on loopback that counts the connections it accepts and
    answers every request with one completion, keeping the connection open."""

    def __init__(self) -> None:
        self.connections = 0
        self.authorizations: list[str] = []
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        body = json.dumps(completion_body()).encode()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                headers = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(headers.get("content-length", "0")))
                self.authorizations.append(headers.get("authorization", ""))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self.server.wait_closed()


async def test_a_client_pool_reuses_one_connection_and_still_sends_each_calls_key() -> None:
    server = _CountingServer()
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
