"""Serving an ASGI app on 127.0.0.1 in a background thread, for the tests' real servers."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass

import uvicorn


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1.

    IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says
    TCP, and without it every reused connection waits ~40 ms for a delayed ACK.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Served:
    """A uvicorn server running in its own thread and event loop."""

    server: uvicorn.Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    port: int

    def stop(self, timeout: float) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=timeout)


def serve(config: uvicorn.Config, *, name: str) -> Served:
    """Start `config`'s app on a free loopback port; returns once it accepts connections."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sockets=[sock]))
        loop.close()

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    wait_started(server)
    return Served(server, thread, loops[0], port)


def wait_started(server: uvicorn.Server, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.005)
