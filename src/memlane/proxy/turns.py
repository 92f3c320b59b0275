"""One model request through the proxy: read, identify, prepare, forward, relay, finish.

    body -> adapter.parse -> identity -> Turn -> pipeline.prepare (waits for the
    session's earlier writes, reads and shapes; the user turn is queued to the store's
    writer) -> adapter.render -> upstream -> the client (streamed as it comes)
    -> pipeline.finish (the assistant turn queued before the client's last byte, then
    background work once it is stored)

When `prepare` decides on a direct answer (an `@@` reference that names no
session), the client gets it in its wire format and nothing goes upstream.

An upstream that is down, slow, failing or cut midway leaves a failed turn and
no assistant rows; the client gets an OpenAI error object with a fitting status.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from memlane.engine import pipeline, waits
from memlane.engine.governance import ContextOverflow
from memlane.engine.sessions.history import chained_session_key
from memlane.engine.threads import TRAFFIC
from memlane.engine.turn import Answer, DirectAnswer, Prepared, Turn
from memlane.proxy import headers as h
from memlane.proxy.access import NAMESPACE_STATE, SESSION_STATE
from memlane.proxy.answers import (
    _fail,
    _finish,
    _queue_answer,
    _response_headers,
    send_upstream,
)
from memlane.proxy.body_limit import DRAIN_FACTOR, too_large
from memlane.proxy.direct import direct_response
from memlane.proxy.errors import ProxyError
from memlane.proxy.forward import (
    Upstream,
)
from memlane.proxy.identity import IdentityError, client_name, compacts_itself, resolve
from memlane.proxy.relay import Outcome, RelayResponse
from memlane.proxy.state import ProxyState
from memlane.proxy.tool_loop import ToolLoop, offered
from memlane.proxy.wire.anthropic import overflow_message
from memlane.proxy.wire.base import (
    ParsedRequest,
    StreamAssembler,
    WireAdapter,
    WireError,
    dumps,
    loads,
    unchanged,
)
from memlane.store import StoreError
from memlane.text.llm import REQUEST_KEY, REQUEST_ROUTE, LentKey, LLMRoute
from memlane.types.resent import RESENT, Resend

log = logging.getLogger("memlane.proxy")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or a 413 when it is over `limit` bytes."""
    declared = request.headers.get("content-length", "")
    over = declared.isdigit() and int(declared) > limit
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            over = True
            chunks.clear()
            if size > limit * DRAIN_FACTOR:
                break
        elif not over:
            chunks.append(chunk)
    if over:
        raise ProxyError(
            413,
            too_large(limit),
            code="request_too_large",
        )
    return b"".join(chunks)


TOO_DEEP = "request body is nested too deeply to be read"


def decode_json(raw: bytes) -> Any:
    try:
        return loads(raw)
    except RecursionError:
        raise ProxyError(400, TOO_DEEP, code="invalid_json") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProxyError(
            400, f"request body is not valid JSON: {exc}", code="invalid_json"
        ) from None


async def serve_model(state: ProxyState, request: Request, adapter: WireAdapter) -> Response:
    raw, parsed = await read_request(state, request, adapter)
    return await serve_parsed(state, request, adapter, raw, parsed)


async def read_request(
    state: ProxyState, request: Request, adapter: WireAdapter
) -> tuple[bytes, ParsedRequest]:
    """The body as sent, and what the wire format reads in it (a 400 when it cannot).
    Items the client sent before (its history) reuse what they parsed into then, within
    its tenant (`types.resent`): under credential tenancy a request without a key is
    refused here, before its body is read."""
    tenant = state.tenant(h.first_values(request.headers))
    raw = await read_body(request, state.settings.max_body_bytes)
    try:
        return raw, adapter.parse(decode_json(raw), Resend(RESENT, tenant, len(raw)))
    except WireError as exc:
        raise ProxyError(400, str(exc), param=exc.param) from None
    except RecursionError:  # decoded, yet too deep to walk (an item kept as its JSON text)
        raise ProxyError(400, TOO_DEEP, code="invalid_json") from None


def lent_key(wire: str, headers: Mapping[str, str]) -> LentKey | None:
    """The client's credential for memlane's own calls this request causes: its
    Authorization for the OpenAI-compatible upstream, or (Messages) its `x-api-key` /
    Authorization for the Anthropic one."""
    names = ("x-api-key", "authorization") if wire == "anthropic" else ("authorization",)
    sent = {name: headers[name] for name in names if headers.get(name)}
    if not sent:
        return None
    return LentKey("anthropic" if wire == "anthropic" else "openai", sent)


def upstream_url(upstream: Upstream, adapter: WireAdapter, request: Request) -> str:
    """Where the request goes: the adapter's path on its upstream, with the client's query
    string (Claude Code's `?beta=true`) as sent."""
    url = upstream.url(adapter.path)
    return f"{url}?{request.url.query}" if request.url.query else url


async def serve_parsed(
    state: ProxyState,
    request: Request,
    adapter: WireAdapter,
    raw: bytes,
    parsed: ParsedRequest,
    *,
    window_model: str = "",
) -> Response:
    """The turn, in memlane's hands (background work waits) but while it waits upstream."""
    with TRAFFIC.serving():
        return await _serve(state, request, adapter, raw, parsed, window_model=window_model)


async def _serve(
    state: ProxyState,
    request: Request,
    adapter: WireAdapter,
    raw: bytes,
    parsed: ParsedRequest,
    *,
    window_model: str,
) -> Response:
    upstream = state.upstream_for(adapter.wire)
    sent = h.first_values(request.headers)
    # memlane's own calls for this turn go where it goes (`text.llm_route`), with the
    # client's key (never stored), only to the kind of upstream it was sent to
    REQUEST_ROUTE.set(LLMRoute(upstream.provider, upstream.base))
    REQUEST_KEY.set(lent_key(adapter.wire, sent))
    tenant = state.tenant(sent)
    try:
        identity = resolve(
            sent,
            parsed.body,
            parsed.messages,
            parsed.instructions,
            without_project=state.settings.sessions_without_project,
        )
    except IdentityError as exc:
        raise ProxyError(400, str(exc), code="invalid_namespace", param="X-Memlane-Repo") from None
    tools = offered(state.settings.proxy_tools, identity.flags.get(h.TOOLS_FLAG))
    started = time.monotonic()
    chained_key = await _chained_key(state, parsed, tenant)
    if chained_key is not None:  # memlane holds the conversation: send it whole
        body = {k: v for k, v in parsed.body.items() if k != PREVIOUS_RESPONSE}
        parsed = replace(parsed, body=body, continued=False)
    turn = Turn(
        key=chained_key or identity.key,
        namespace=identity.namespace,
        model=parsed.model,
        wire=adapter.wire,
        messages=parsed.messages,
        tenant=tenant,
        agentic=identity.agentic,
        managed=identity.agentic or state.settings.scaffold_clients == "all",
        governed=identity.agentic or state.settings.governance_clients == "all",
        ephemeral=identity.ephemeral,
        flags=identity.flags,
        continued=parsed.continued,
        chained=chained_key is not None,
        instructions=parsed.instructions,
        parent_key=identity.parent_key,
        window_model=window_model,
        client_compacts=compacts_itself(sent),
        client=client_name(sent),
        waited=time.monotonic() - started,  # the lookup's wait is the request's
    )
    prepared = await _prepare(state, turn, adapter)
    if isinstance(prepared, DirectAnswer):  # the user is told why, as the assistant's answer
        await _finish(state, turn, prepared.answer())
        return direct_response(adapter.wire, parsed.model, prepared.text, stream=parsed.stream)
    outgoing = prepared.messages
    if turn.session is not None:
        setattr(request.state, SESSION_STATE, turn.session.id)  # for the access line
        setattr(request.state, NAMESPACE_STATE, turn.namespace)
    headers = upstream.headers(request.headers.raw)
    headers.setdefault("content-type", "application/json")
    url = upstream_url(upstream, adapter, request)
    if tools:  # memlane's own tools: offered upstream, its calls answered here
        loop = ToolLoop(state, turn, adapter, parsed, tools, upstream, url, headers)
        outgoing = await loop.with_pending(outgoing)
        return await (loop.stream(outgoing) if parsed.stream else loop.complete(outgoing))
    payload = raw if unchanged(parsed, outgoing) else dumps(adapter.render(parsed, outgoing))
    call = Call(upstream, url, payload, headers)
    turn.clock.mark("render")
    if parsed.stream:
        return await _stream(state, turn, adapter, call)
    return await _complete(state, turn, adapter, call)


@dataclass(frozen=True)
class Call:
    """One request to an upstream: which, where, what, with which headers."""

    upstream: Upstream
    url: str
    payload: bytes
    headers: dict[str, str]


PREVIOUS_RESPONSE = "previous_response_id"


async def _chained_key(state: ProxyState, parsed: ParsedRequest, tenant: str) -> str | None:
    """The session a `previous_response_id` points at, when memlane stored that answer.

    Resolving it here makes chains work with upstreams that keep nothing (`store:
    false`, local servers) and across restarts; an id memlane does not know is
    forwarded as sent, for the upstream to resolve.
    """
    previous = parsed.body.get(PREVIOUS_RESPONSE) if parsed.continued else None
    if not isinstance(previous, str) or not previous:
        return None
    rt = state.runtime
    found = _looked_up(state, previous, tenant)
    return await waits.within(rt, None, f"looking up {PREVIOUS_RESPONSE}", found, None)


async def _looked_up(state: ProxyState, previous: str, tenant: str) -> str | None:
    """`_chained_key`'s lookup, once the answers queued to be stored are: one wait in all
    (the writes and the read both wait on a store that may be gone)."""
    rt = state.runtime
    await rt.writes.settled()  # the answer it names may be queued to be stored
    try:
        return await asyncio.to_thread(chained_session_key, rt, previous, tenant)
    except StoreError as exc:
        log.warning("could not look up %s %s: %s", PREVIOUS_RESPONSE, previous, exc)
        return None


async def _prepare(state: ProxyState, turn: Turn, adapter: WireAdapter) -> Prepared:
    try:
        return await pipeline.prepare(state.runtime, turn)
    except ContextOverflow as exc:  # pre-flight: refused here, not failed upstream
        await _fail(state, turn)
        message = str(exc)
        if adapter.wire == "anthropic":
            message = overflow_message(exc.tokens, exc.limit, message)
        raise ProxyError(400, message, code=exc.code) from None
    except StoreError as exc:
        log.error("store failed while preparing a turn: %s", exc)
        await _fail(state, turn)
        raise ProxyError(
            503, f"memlane could not store the turn: {exc}", type="server_error", code="store_error"
        ) from None
    except Exception:
        log.exception("preparing a turn failed")
        await _fail(state, turn)
        raise ProxyError(
            500, "memlane failed to prepare the request (see the proxy's log)", type="server_error"
        ) from None


async def _complete(state: ProxyState, turn: Turn, adapter: WireAdapter, call: Call) -> Response:
    upstream = await send_upstream(
        state, turn, adapter, call.upstream, call.url, call.payload, call.headers, stream=False
    )
    if isinstance(upstream, Response):
        return upstream
    headers = await _response_headers(state, turn, upstream.headers)
    answer = functools.partial(read_answer, adapter, upstream.content)  # read in the writer
    if not pipeline.finish_after_sending(state.runtime, turn):
        await _finish(state, turn, answer)
        return Response(upstream.content, status_code=upstream.status_code, headers=headers)
    await pipeline.ready_to_finish(state.runtime, turn)
    queued = BackgroundTask(_queue_answer, state, turn, answer)  # once the body is handed on
    return Response(upstream.content, upstream.status_code, headers, background=queued)


def read_answer(adapter: WireAdapter, content: bytes) -> Answer:
    """The answer to store, read from the upstream's body; one memlane cannot read is still
    the client's answer (relayed as sent), stored as failed."""
    try:
        return adapter.answer_from_json(loads(content))
    except Exception:
        log.warning("could not read the upstream's answer to store it", exc_info=True)
        return Answer([], failed=True)


async def _stream(state: ProxyState, turn: Turn, adapter: WireAdapter, call: Call) -> Response:
    opened = await send_upstream(
        state, turn, adapter, call.upstream, call.url, call.payload, call.headers, stream=True
    )
    if isinstance(opened, Response):
        return opened
    upstream = opened

    async def settle(outcome: Outcome, assembler: StreamAssembler) -> None:
        answer = Answer([], failed=True)
        if outcome is Outcome.DONE:
            try:
                answer = assembler.answer()
            except Exception:  # the tee only copies: a stream it cannot read is still relayed
                log.warning("could not assemble the streamed answer to store it", exc_info=True)
        if answer.failed:
            log.warning(
                "stream for session %s %s without a complete answer",
                turn.session.id if turn.session else "-",
                outcome.value,
            )
        await _finish(state, turn, answer)

    return RelayResponse(
        upstream,
        adapter.assembler(),
        settle=settle,
        error_frame=adapter.stream_error,
        headers=await _response_headers(state, turn, upstream.headers),
    )
