"""A raw HTTP/1.1 server on loopback for the client side of memlane's HTTP calls: it
counts the connections it accepts and keeps them open between requests, records what
each request carried, and can reset a connection the way a server closing an idle
kept-alive one does."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator


class RawServer:
    """Answers every request with `body` (JSON) on a kept-alive connection.

    `reset_reused`: a second request on a connection is reset (RST) once its headers are
    read, its body not: what a client meets when it reuses a connection the server is
    closing at its idle timeout. `broken`: every request is reset so. `reset_after`: every
    request is read whole, then reset after that many seconds, unanswered (a request
    worked on, then cut)."""

    def __init__(
        self,
        body: bytes = b'{"ok":true}',
        *,
        reset_reused: bool = False,
        broken: bool = False,
        reset_after: float | None = None,
    ) -> None:
        self.body = body
        self.reset_reused = reset_reused
        self.broken = broken
        self.reset_after = reset_after
        self.connections = 0
        self.resets = 0
        self.answered: list[int] = []
        """The body size of each request answered."""
        self.authorizations: list[str] = []
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        """The base URL (`…/v1`) it serves."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if self.broken or (self.reset_reused and served):
                    self._reset(writer)
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                headers = {k.lower(): v for k, v in headers.items()}
                length = int(headers.get("content-length", "0"))
                await reader.readexactly(length)
                if self.reset_after is not None:
                    await asyncio.sleep(self.reset_after)
                    self._reset(writer)
                    return
                self.answered.append(length)
                self.authorizations.append(headers.get("authorization", ""))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(self.body)}\r\n\r\n".encode()
                    + self.body
                )
                await writer.drain()
                served += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _reset(self, writer: asyncio.StreamWriter) -> None:
        self.resets += 1
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self._server.wait_closed()


@contextlib.contextmanager
def in_a_thread(server: RawServer) -> Iterator[str]:
    """`server` running on an event loop of its own, for a client that blocks (its base
    URL); stopped on the way out."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="raw-http", daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(server.start(), loop).result(5)
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(5)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
