"""Anthropic Messages routes: `POST /v1/messages` and `POST /v1/messages/count_tokens`.

A Messages request is a turn like any other (`turns.serve_parsed`), forwarded to the
Anthropic upstream with the client's query string and headers. What is not a turn
goes through untouched and is never stored: `count_tokens` (answered with memlane's
own count when the upstream has no such route), `max_tokens: 1` probes, and requests
with no user content of their own. A request with Anthropic's 1M-context beta
(`anthropic-beta: context-1m-…`, which Claude Code sends for its `[1m]` models) is
governed against a 1M-token window.
"""

from __future__ import annotations

import json
import logging

from fastapi import Request
from starlette.responses import Response

from memlane.engine.governance.budget import LONG_CONTEXT_TAG
from memlane.proxy.answers import error_response, transport_error
from memlane.proxy.errors import ProxyError
from memlane.proxy.forward import UpstreamError, relayed_headers
from memlane.proxy.relay import Outcome, RelayResponse
from memlane.proxy.state import ProxyState
from memlane.proxy.turns import decode_json, read_body, read_request, serve_parsed
from memlane.proxy.wire import MESSAGES
from memlane.proxy.wire.anthropic import PREFIX, fixed_text, parse_messages, side_request
from memlane.proxy.wire.base import StreamAssembler, WireError
from memlane.text.tokens import REPLY_PRIMING

log = logging.getLogger("memlane.proxy")

COUNT_PATH = PREFIX + "/count_tokens"
LONG_CONTEXT_BETA = "context-1m-"
"""Prefix of Anthropic's 1M-token context beta flag (`context-1m-2025-08-07`)."""
NO_ROUTE = (404, 405)
"""An upstream answering count_tokens with these has no such route: memlane counts."""


def window_model(model: str, beta: str) -> str:
    """The name governance sizes the window by: `<model>[1m]` under the 1M-context beta."""
    flags = [flag.strip() for flag in beta.split(",")]
    if model and any(flag.startswith(LONG_CONTEXT_BETA) for flag in flags):
        return model if model.endswith(LONG_CONTEXT_TAG) else model + LONG_CONTEXT_TAG
    return ""


async def serve_messages(state: ProxyState, request: Request) -> Response:
    raw, parsed = await read_request(state, request, MESSAGES)
    reason = side_request(parsed)
    if reason is not None:
        log.debug("forwarding %s untouched (%s)", request.url.path, reason)
        return await forward_untouched(state, request, MESSAGES.path, raw, stream=parsed.stream)
    beta = request.headers.get("anthropic-beta", "")
    return await serve_parsed(
        state, request, MESSAGES, raw, parsed, window_model=window_model(parsed.model, beta)
    )


async def count_tokens(state: ProxyState, request: Request) -> Response:
    """Forwarded as sent; memlane counts only when the upstream has no such route."""
    raw = await read_body(request, state.settings.max_body_bytes)
    response = await forward_untouched(state, request, COUNT_PATH, raw, stream=False)
    if response.status_code not in NO_ROUTE:
        return response
    try:
        body = decode_json(raw)
        model, _, messages = parse_messages(body)
    except WireError as exc:
        raise ProxyError(400, str(exc), param=exc.param) from None
    tokenizer = state.runtime.tokenizer_for(model or None)
    tokens = REPLY_PRIMING + tokenizer.count(fixed_text(body))
    tokens += sum(tokenizer.count_message(m) for m in messages)
    return Response(json.dumps({"input_tokens": tokens}), media_type="application/json")


async def forward_untouched(
    state: ProxyState, request: Request, path: str, raw: bytes, *, stream: bool
) -> Response:
    """The very bytes the client sent, to the Anthropic upstream; the answer relayed as it
    comes (a stream chunk by chunk), nothing stored."""
    upstream = state.upstream_for(MESSAGES.wire)
    url = upstream.url(path) + (f"?{request.url.query}" if request.url.query else "")
    headers = upstream.headers(request.headers.raw)
    headers.setdefault("content-type", "application/json")
    try:
        answer = await upstream.send("POST", url, raw, headers, stream=stream)
    except UpstreamError as exc:
        raise transport_error(state, upstream, exc) from None
    if not stream or answer.status_code >= 400:
        try:
            content = await answer.aread() if stream else answer.content
        except UpstreamError as exc:
            raise transport_error(state, upstream, exc) from None
        finally:
            await answer.aclose()
        if answer.status_code >= 400 and answer.status_code not in NO_ROUTE:
            return error_response(MESSAGES, answer.status_code, content)
        return Response(content, answer.status_code, headers=relayed_headers(answer.headers))

    async def settle(outcome: Outcome, assembler: StreamAssembler) -> None:
        return None  # not a turn: nothing to store

    return RelayResponse(
        answer,
        MESSAGES.assembler(),
        settle=settle,
        error_frame=MESSAGES.stream_error,
        headers=relayed_headers(answer.headers),
    )
