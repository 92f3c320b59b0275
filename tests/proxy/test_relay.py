"""The relay stops when its client leaves, but never in the middle of settling the
answer, and a cancel from outside (a graceful stop whose grace ran out) is not mistaken
for the client leaving: the client is told, in its wire format."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest

from memlane.config import Settings
from memlane.proxy.forward import Upstream, UpstreamResponse
from memlane.proxy.relay import Outcome, RelayResponse, Settle
from memlane.proxy.wire.base import StreamAssembler
from memlane.proxy.wire.chat import ChatAdapter
from tests.support.upstream import Reply, ScriptedUpstream

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
async def client_of(settings: Settings, upstream: ScriptedUpstream) -> AsyncIterator[Upstream]:
    client = Upstream(settings.model_copy(update={"upstream_url": upstream.url}))
    yield client
    await client.aclose()


async def streamed(client: Upstream) -> UpstreamResponse:
    return await client.send(
        "POST",
        client.url("/chat/completions"),
        json.dumps(BODY).encode(),
        {"content-type": "application/json"},
        stream=True,
    )


async def relay_of(client: Upstream, settle: Settle) -> RelayResponse:
    """A relay of a streamed Chat Completions answer from the scripted upstream."""
    return RelayResponse(
        await streamed(client),
        ChatAdapter().assembler(),
        settle=settle,
        error_frame=lambda message, *, code: f"error: {code}".encode(),
        headers={},
    )


class Client:
    """The ASGI side: what was sent, and a disconnect once `leave` is set."""

    def __init__(self) -> None:
        self.sent: list[MutableMapping[str, Any]] = []
        self.leave = asyncio.Event()
        self.flowing = asyncio.Event()
        """Set once three messages were sent: the stream is under way."""

    async def receive(self) -> dict[str, Any]:
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)
        if len(self.sent) >= 3:
            self.flowing.set()


async def test_a_client_leaving_while_the_answer_settles_does_not_cut_the_settle(
    client_of: Upstream, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="all of it", chunk_size=3))
    client = Client()
    settled: list[str] = []

    async def settle(outcome: Outcome, assembler: StreamAssembler) -> None:
        settled.append(f"start {outcome.name}")
        client.leave.set()
        await asyncio.sleep(0.1)  # the watcher sees the disconnect meanwhile
        settled.append("end")

    relay = await relay_of(client_of, settle)
    await relay({"type": "http"}, client.receive, client.send)
    assert settled == ["start DONE", "end"]
    assert relay.gone


async def test_a_cancel_from_outside_is_not_taken_for_the_client_leaving(
    client_of: Upstream, upstream: ScriptedUpstream
) -> None:
    upstream.script(Reply(text="word " * 50, chunk_size=5, delay=0.05))
    client = Client()
    outcomes: list[Outcome] = []

    async def settle(outcome: Outcome, assembler: StreamAssembler) -> None:
        outcomes.append(outcome)

    relay = await relay_of(client_of, settle)
    task = asyncio.create_task(relay({"type": "http"}, client.receive, client.send))
    await client.flowing.wait()
    task.cancel()  # what uvicorn does to a request its graceful stop no longer waits for
    await asyncio.wait([task])
    assert not task.cancelled()  # answered: the cancel was handled, not raised further
    assert task.cancelling() == 0
    assert not relay.gone
    assert outcomes == [Outcome.STOPPED]  # settled once, as a turn that did not finish
    bodies = [m.get("body") for m in client.sent if m["type"] == "http.response.body"]
    assert bodies[-2:] == [b"error: memlane_stopping", b""]  # told, then the end
