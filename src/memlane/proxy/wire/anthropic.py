"""Anthropic Messages (`POST /v1/messages`): content blocks in, a `message` or its events out.

Claude Code speaks only this format. `system` is a string or a list of blocks
(Claude Code's first one is a per-request `x-anthropic-billing-header`); it is
forwarded as sent and costs tokens, but it is not a message: it is never stored
or fingerprinted, so a history resent under a new billing header still matches
what is stored. `messages` hold content blocks, one memlane item each
(`anthropic_blocks`). Errors take Anthropic's shape,
`{"type": "error", "error": {"type": …, "message": …}}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlane.engine.turn import Answer
from memlane.proxy.wire.anthropic_answer import MessagesAssembler, answer_from_json
from memlane.proxy.wire.anthropic_blocks import (
    check_blocks,
    parse_message,
    render_messages,
    user_content_of_its_own,
)
from memlane.proxy.wire.base import ParsedRequest, dumps, model_and_stream, require, sse_event
from memlane.types import Message, Wire
from memlane.types.resent import FRESH, Resend

PREFIX = "/v1/messages"
"""memlane's Anthropic routes (`/v1/messages`, `/v1/messages/count_tokens`)."""

ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's error type for each status it documents."""
_BY_CODE: Mapping[str, str] = {
    "context_length_exceeded": "invalid_request_error",
    "invalid_json": "invalid_request_error",
    "request_too_large": "request_too_large",
    "upstream_timeout": "timeout_error",
}
_BY_TYPE: Mapping[str, str] = {
    "invalid_request_error": "invalid_request_error",
    "authentication_error": "authentication_error",
    "not_found": "not_found_error",
}


def error_type(status: int | None, type: str, code: str | None) -> str:
    """Anthropic's `error.type` for one of memlane's errors (status, OpenAI-style type, code)."""
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    if status is None and code and code.startswith("upstream_") and code[9:].isdigit():
        status = int(code[9:])
    if status is not None and status in ERROR_TYPES:
        return ERROR_TYPES[status]
    if type in _BY_TYPE:
        return _BY_TYPE[type]
    return "invalid_request_error" if status is not None and status < 500 else "api_error"


def anthropic_error(message: str, type: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message}}


def overflow_message(tokens: int, limit: int, detail: str) -> str:
    """Anthropic's wording, which Claude Code recognises and answers by compacting."""
    return f"prompt is too long: {tokens} tokens > {limit} maximum. {detail}"


def system_text(system: Any) -> str:
    """The system prompt's text (a string, or the text of its blocks)."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


def fixed_text(body: Mapping[str, Any]) -> str:
    """What the request costs outside its messages: the system prompt and the tools."""
    tools = body.get("tools")
    listed = dumps(tools).decode("utf-8") if isinstance(tools, list) and tools else ""
    return "\n".join(t for t in (system_text(body.get("system")), listed) if t)


def parse_messages(body: Any, reuse: Resend = FRESH) -> tuple[str, bool, list[Message]]:
    """Model, stream flag and items of a Messages (or count_tokens) body; `WireError` if bad."""
    model, stream = model_and_stream(body)
    items = body.get("messages")
    require(
        isinstance(items, list) and bool(items), "messages must be a non-empty list", "messages"
    )
    check_blocks(body.get("system"), "system")
    tools = body.get("tools")
    require(tools is None or isinstance(tools, list), "tools must be a list", "tools")
    max_tokens = body.get("max_tokens")
    require(
        max_tokens is None or (isinstance(max_tokens, int) and not isinstance(max_tokens, bool)),
        "max_tokens must be an integer",
        "max_tokens",
    )
    return model, stream, reuse.parse(items, _parse_item)


def _parse_item(item: Any, index: int) -> list[Message]:
    return parse_message(item, f"messages[{index}]")


def side_request(parsed: ParsedRequest) -> str | None:
    """Why this request is not a turn of its session (forwarded, never stored), or None.

    A `max_tokens: 1` probe (a quota or key check) and a request with no user content of its
    own (nothing but the harness's reminders) say nothing a session should keep.
    """
    if parsed.body.get("max_tokens") == 1:
        return "a max_tokens 1 probe"
    if not user_content_of_its_own(parsed.messages):
        return "no user content of its own"
    return None


class MessagesAdapter:
    wire: Wire = "anthropic"
    path = PREFIX

    def parse(self, body: Any, reuse: Resend = FRESH) -> ParsedRequest:
        model, stream, messages = parse_messages(body, reuse)
        return ParsedRequest(body, messages, model, stream, instructions=fixed_text(body))

    def render(self, parsed: ParsedRequest, messages: Sequence[Message]) -> dict[str, Any]:
        return {**parsed.body, "messages": render_messages(messages)}

    def answer_from_json(self, data: Any) -> Answer:
        return answer_from_json(data)

    def assembler(self) -> MessagesAssembler:
        return MessagesAssembler()

    def error_body(
        self, message: str, *, type: str, code: str | None, param: str | None = None
    ) -> dict[str, Any]:
        return anthropic_error(message, error_type(None, type, code))

    def stream_error(self, message: str, *, code: str) -> bytes:
        event = anthropic_error(message, error_type(None, "upstream_error", code))
        return sse_event(event, "error")
