"""The upstream's answer to one turn: asked for, relayed or refused, and stored.

Shared by a plain turn (`proxy.turns`) and a turn whose model calls memlane's own
tools (`proxy.tool_loop`):

- `send_upstream` asks the upstream; a refusal becomes the client's error in its wire
  format (the turn marked failed, a context window it names learned);
- `_response_headers` are the headers the client gets (the upstream's worth relaying,
  what governance did);
- an answer the client's next request will bring back is stored after the client has
  it, its session held meanwhile (`finish_later`, `answer_hold`, `engine.turnorder`);
  one it will not bring back is stored before (`_finish`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from memlane.engine import pipeline, waits
from memlane.engine.governance import counted
from memlane.engine.governance.budget import learn_from_upstream_error
from memlane.engine.threads import TRAFFIC
from memlane.engine.turn import Answer, Turn
from memlane.engine.turnorder import Hold
from memlane.proxy import headers as h
from memlane.proxy.errors import ProxyError, upstream_refusal
from memlane.proxy.forward import (
    Upstream,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
    relayed_headers,
)
from memlane.proxy.relay import HoldSession
from memlane.proxy.state import ProxyState
from memlane.proxy.wire.base import WireAdapter, dumps
from memlane.store import StoreError

log = logging.getLogger("memlane.proxy")


def _learn_window(state: ProxyState, turn: Turn, status: int, content: bytes) -> None:
    """An upstream `context_length_exceeded` teaches governance the model's real window."""
    rt = state.runtime
    model = turn.window_model or turn.model
    try:
        learn_from_upstream_error(rt.settings, rt.windows, model, status, content)
    except StoreError as exc:
        log.warning("could not remember the window of %s: %s", turn.model, exc)


async def _fail(state: ProxyState, turn: Turn) -> None:
    try:
        await pipeline.finish(state.runtime, turn, Answer([], failed=True))
    except Exception:
        log.exception("recording a failed turn failed")


def transport_error(state: ProxyState, upstream: Upstream, exc: UpstreamError) -> ProxyError:
    if isinstance(exc, UpstreamTimeout):
        return ProxyError(
            504,
            f"the upstream did not answer within {state.settings.upstream_timeout:g} s "
            f"(or finish within {state.settings.upstream_deadline:g} s)",
            type="upstream_error",
            code="upstream_timeout",
        )
    return ProxyError(
        502,
        f"the upstream at {upstream.base} could not be reached or broke off ({exc.reason})",
        type="upstream_error",
        code="upstream_unavailable",
    )


def error_response(adapter: WireAdapter, status: int, content: bytes) -> Response:
    """The upstream's error as OpenAI's error object (relayed as is when it already is one)."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        data = None
    if not (isinstance(data, dict) and isinstance(data.get("error"), dict)):
        text = content.decode("utf-8", errors="replace").strip()[:2000] or f"HTTP {status}"
        data = adapter.error_body(
            f"upstream error: {text}", type="upstream_error", code=f"upstream_{status}"
        )
    return Response(dumps(data), status_code=status, media_type="application/json")


PUT_OFF_AFTER_MS = 20.0
"""An answer whose upstream took at least this long is stored once its client's next
request has gone upstream (or `ANSWER_GRACE_SECONDS` passed), not the moment the client
has it: storing it then would share the GIL with that request's shaping. Below it, the
next answer may well come back before a put-off store is done, and every request of the
session would wait on it: stored at once, it runs while the next request is shaped."""


SENT_SECONDS = 0.002
"""How long after a request is handed to the upstream client its session's put-off answer
is asked for: its bytes are written by then (aiohttp writes the body in a task of its
own), and the store runs while the upstream works, not beside the send. A turn that
needs it sooner asks itself (`pipeline.stored`)."""


def hold_answer(state: ProxyState, turn: Turn) -> Hold:
    """Hold the session until the turn's answer is stored, its storing put off while the
    client's next request is likely on its way (`PUT_OFF_AFTER_MS`), when nothing else is
    waiting to be stored or shaped: under load some request is always being shaped, and
    put-off stores only queue up (200 streaming clients, `load.py`: 75 req/s became 56)."""
    order = state.runtime.turn_order
    quiet = order.holding == 0 and TRAFFIC.alone
    hold = order.hold(turn.key)
    if not quiet or turn.clock.took("upstream") < PUT_OFF_AFTER_MS:
        hold.hurry()
    return hold


def finish_later(
    state: ProxyState, turn: Turn, answer: Callable[[], Answer]
) -> Callable[[], Awaitable[None]]:
    """Storing the `answer`, read once its client has the answer (reading it is not in
    front of the client) and the client's next request has gone upstream, or a turn needs
    it (`Hold.wanted_within`); until it is stored the session's next turn waits to store
    its own messages (`engine.turnorder`)."""
    release = hold_answer(state, turn)

    async def store() -> None:
        try:
            await release.wanted_within()
            with TRAFFIC.finishing():
                await _finish(state, turn, answer())
        finally:
            release()

    return store


def answer_hold(state: ProxyState, turn: Turn) -> HoldSession | None:
    """How a stream holds the session while the turn's answer is stored after its end
    (`relay.RelayResponse`); None when the answer must be stored before the end (the
    client's next request will not bring it back)."""
    if not turn.answer_resent:
        return None

    async def hold() -> Hold:
        await _sent_stored(state, turn)
        return hold_answer(state, turn)

    return hold


async def _sent_stored(state: ProxyState, turn: Turn) -> None:
    """What the client sent, stored before it has the whole answer, unless this process
    serves the store alone (`Runtime.serves_alone`: no other process may take the
    session's next turn from the store), no other request is in its hands, and clients
    pause before their next request long enough for the store to be done by then
    (`engine.pace`). Then the answer does not wait: the session's next turn does
    (`TurnOrder.incoming`), and a crash meanwhile loses only the turn in flight, which the
    client resends. Under load the answer waits as before, as a put-off answer store
    does (`hold_answer`): the store would only overlap other requests' shaping."""
    rt = state.runtime
    if not (rt.serves_alone and TRAFFIC.alone and rt.client_pace.unhurried):
        await pipeline.stored(rt, turn)
    rt.client_pace.answered(turn.key)


class StoredAfter(Response):
    """A whole answer whose turn is stored after the client has it, whatever happens."""

    def __init__(
        self,
        content: bytes,
        *,
        status_code: int,
        headers: Mapping[str, str],
        store: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(content, status_code=status_code, headers=headers)
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.store()


async def _response_headers(state: ProxyState, turn: Turn, upstream: Any) -> dict[str, str]:
    """The upstream's headers worth relaying, plus what governance did with this request
    (its token count, which may be finishing beside the upstream call: not waited for past
    the request's bound, `engine.waits`)."""
    if turn.counting is not None:
        rt = state.runtime
        await waits.within(rt, turn, "counting the request's tokens", counted(turn), None)
    out = relayed_headers(upstream)
    if turn.context is not None:
        out[h.CONTEXT] = h.context_value(*turn.context)
    timing = h.timing_value(turn.clock.stages)
    theirs = next((name for name in out if name.lower() == h.SERVER_TIMING), None)
    if theirs is not None:  # the upstream's own metrics first, then memlane's
        out[theirs] = f"{out[theirs]}, {timing}"
    elif timing:
        out[h.SERVER_TIMING] = timing
    return out


async def _finish(state: ProxyState, turn: Turn, answer: Answer) -> None:
    try:
        await pipeline.finish(state.runtime, turn, answer)
    except Exception:
        log.exception("storing the answer failed")


async def send_upstream(
    state: ProxyState,
    turn: Turn,
    adapter: WireAdapter,
    upstream: Upstream,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    *,
    stream: bool,
) -> UpstreamResponse | Response:
    """The upstream's answer (open, when `stream`: read it as it comes, then close it); or,
    when it refused, the error the client gets in its own wire format (the turn marked
    failed, a context window it names learned)."""
    # a put-off answer of the session (`hold_answer`) is stored while the upstream works
    asyncio.get_running_loop().call_later(SENT_SECONDS, state.runtime.turn_order.hurry, turn.key)
    try:
        with TRAFFIC.waiting():
            sent = await upstream.send("POST", url, content, headers, stream=stream)
        turn.clock.mark("upstream")  # its headers when streamed, its whole answer if not
    except UpstreamError as exc:
        refused = transport_error(state, upstream, exc)
        turn.upstream_error = refused.message
        await _fail(state, turn)
        raise refused from None
    if sent.status_code < 400:
        return sent
    try:
        body = await sent.aread() if stream else sent.content
    except UpstreamError:
        body = b""
    finally:
        await sent.aclose()
    _learn_window(state, turn, sent.status_code, body)
    turn.upstream_error = upstream_refusal(upstream.base, sent.status_code, body)
    await _fail(state, turn)
    return error_response(adapter, sent.status_code, body)
