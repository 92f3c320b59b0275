"""The upstream's answer to one turn: asked for, relayed or refused, and stored.

Shared by a plain turn (`proxy.turns`) and a turn whose model calls memlane's own
tools (`proxy.tool_loop`):

- `send_upstream` asks the upstream; a refusal becomes the client's error in its wire
  format (the turn marked failed, a context window it names learned);
- `_response_headers` are the headers the client gets (the upstream's worth relaying,
  what governance did);
- `_finish` queues the answer's store (`pipeline.finish`): before the client has the
  whole answer, durable by then only when the client will not bring it back.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from starlette.responses import Response

from memlane.engine import pipeline, threads, waits
from memlane.engine.governance.budget import learn_from_upstream_error
from memlane.engine.threads import TRAFFIC
from memlane.engine.turn import Answer, Turn
from memlane.proxy import headers as h
from memlane.proxy.errors import STOPPED, ProxyError, upstream_refusal
from memlane.proxy.forward import (
    Upstream,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
    relayed_headers,
)
from memlane.proxy.state import ProxyState
from memlane.proxy.wire.base import WireAdapter, dumps
from memlane.store import StoreError

log = logging.getLogger("memlane.proxy")


def _learn_window(state: ProxyState, turn: Turn, status: int, content: bytes) -> None:
    """An upstream `context_length_exceeded` teaches governance the model's real window (in a
    worker thread: a store write, never made on the event loop)."""
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


async def _response_headers(state: ProxyState, turn: Turn, upstream: Any) -> dict[str, str]:
    """The upstream's headers worth relaying, plus what governance did with this request
    (its token count, which may be finishing beside the upstream call: not waited for past
    the request's bound, `engine.waits`)."""
    await pipeline.counts_in(state.runtime, turn)
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


async def _finish(state: ProxyState, turn: Turn, answer: Answer | Callable[[], Answer]) -> None:
    try:
        await pipeline.finish(state.runtime, turn, answer)
    except Exception:
        log.exception("storing the answer failed")


async def _queue_answer(
    state: ProxyState, turn: Turn, answer: Answer | Callable[[], Answer]
) -> None:
    """`pipeline.queue_answer` as a response's background task: it never suspends, so the
    answer is queued before the event loop reads another request."""
    try:
        pipeline.queue_answer(state.runtime, turn, answer)
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
    try:
        with TRAFFIC.waiting():
            sent = await upstream.send("POST", url, content, headers, stream=stream)
        turn.clock.mark("upstream")  # its headers when streamed, its whole answer if not
    except UpstreamError as exc:
        refused = transport_error(state, upstream, exc)
        turn.upstream_error = refused.message
        await _fail(state, turn)
        raise refused from None
    except asyncio.CancelledError:  # a graceful stop cut it: recorded, then answered
        turn.upstream_error = STOPPED
        await _fail(state, turn)
        raise
    if sent.status_code < 400:
        return sent
    try:
        body = await sent.aread() if stream else sent.content
    except UpstreamError:
        body = b""
    finally:
        await sent.aclose()
    learning = threads.to_thread(_learn_window, state, turn, sent.status_code, body)
    await waits.within(state.runtime, turn, "learning the model's window", learning, None)
    turn.upstream_error = upstream_refusal(upstream.base, sent.status_code, body)
    await _fail(state, turn)
    return error_response(adapter, sent.status_code, body)
