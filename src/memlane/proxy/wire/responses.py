"""Responses (`POST /v1/responses`): `input` items in, `output` items or typed events out.

Codex CLI speaks only this format: `store: false`, `instructions` apart from the
items, function calls and their outputs, reasoning items with
`encrypted_content`, its own headers. Items memlane does not know are kept as
tool chatter with their whole JSON as text, and forwarded untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlane.engine.turn import Answer
from memlane.proxy.wire.base import (
    EventAssembler,
    OpenAIErrors,
    ParsedRequest,
    WireError,
    content_text,
    model_and_stream,
    position,
    require,
    sse_event,
    token_count,
)
from memlane.types import Message, Role, ToolCall, Wire
from memlane.types.resent import FRESH, Resend

MESSAGE_ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant"})
INSTRUCTION_ROLES: frozenset[str] = frozenset({"system", "developer"})
_BOOKKEEPING = ("type", "id", "status")


def _parse_input(item: Any, index: int) -> tuple[Message]:
    return (parse_item(item, f"input[{index}]"),)


def parse_item(item: Any, param: str) -> Message:
    """One input or output item as a `Message`, keeping the item as its `raw`."""
    require(isinstance(item, dict), f"{param} must be an object", param)
    kind = item.get("type", "message" if "role" in item else None)
    require(isinstance(kind, str), f"{param}.type must be a string", f"{param}.type")
    if kind == "message":
        role = item.get("role")
        require(
            isinstance(role, str) and role in MESSAGE_ROLES,
            f"{param}.role must be one of {', '.join(sorted(MESSAGE_ROLES))}",
            f"{param}.role",
        )
        message_role: Role = role
        text = content_text(item.get("content"), f"{param}.content")
        return Message(message_role, text, raw=item, wire="responses")
    if kind == "reasoning":
        summary = item.get("summary")
        text = content_text(summary if isinstance(summary, list) else None, f"{param}.summary")
        return Message("assistant", text, "reasoning", raw=item, wire="responses")
    role = item.get("role")
    if (
        isinstance(role, str)
        and role in INSTRUCTION_ROLES
        and not kind.endswith(("_call", "_output"))
    ):
        # Codex's `additional_tools` (its tool definitions as a developer input item): an
        # instruction governance must keep in the head, not a call nobody answers.
        rest = {k: v for k, v in item.items() if k not in (*_BOOKKEEPING, "role")}
        text = json.dumps(rest, ensure_ascii=False, sort_keys=True)
        instruction: Role = "system" if role == "system" else "developer"
        return Message(instruction, text, raw=item, wire="responses")
    call_id = item.get("call_id", item.get("id"))
    call_id = call_id if isinstance(call_id, str) else None
    if kind.endswith("_output"):
        output = item.get("output")
        text = output if isinstance(output, str) else _output_text(output, param)
        return Message("tool", text, "tool_result", call_id=call_id, raw=item, wire="responses")
    if kind == "function_call":
        name, arguments = item.get("name", ""), item.get("arguments", "")
        require(isinstance(name, str), f"{param}.name must be a string", f"{param}.name")
        require(isinstance(arguments, str), f"{param}.arguments must be a string", param)
    elif kind == "custom_tool_call":
        name, arguments = str(item.get("name", "")), str(item.get("input", ""))
    else:  # shell calls, web searches, item references, whatever comes next
        name = kind
        rest = {k: v for k, v in item.items() if k not in _BOOKKEEPING}
        arguments = json.dumps(rest, ensure_ascii=False, sort_keys=True)
    call = ToolCall(call_id or "", name, arguments)
    return Message("assistant", "", "tool_call", (call,), raw=item, wire="responses")


def _output_text(output: Any, param: str) -> str:
    if isinstance(output, list):
        return content_text(output, f"{param}.output")
    return "" if output is None else json.dumps(output, ensure_ascii=False)


def to_wire(message: Message) -> list[dict[str, Any]]:
    """A message as Responses input items (a message with several calls is several items)."""
    if message.wire == "responses" and message.raw is not None:
        return [dict(message.raw)]
    if message.kind == "tool_result":
        return [
            {
                "type": "function_call_output",
                "call_id": message.call_id or "",
                "output": message.text,
            }
        ]
    if message.kind == "tool_call":
        return [
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        ]
    if message.kind == "reasoning":
        return []  # reasoning cannot be re-created without the upstream's ids and encryption
    return [{"type": "message", "role": message.role, "content": message.text}]


def answer_from_output(output: Any, usage: Any, response_id: Any = None) -> Answer:
    items = output if isinstance(output, list) else []
    messages = []
    for i, item in enumerate(items):
        try:
            messages.append(parse_item(item, f"output[{i}]"))
        except WireError:  # an item memlane cannot read is not stored; the rest is
            continue
    usage = usage if isinstance(usage, dict) else {}
    return Answer(
        messages,
        token_count(usage.get("input_tokens")),
        token_count(usage.get("output_tokens")),
        response_id=response_id if isinstance(response_id, str) and response_id else None,
    )


class ResponsesAssembler(EventAssembler):
    """Rebuilds the output items from typed events (`response.output_item.done`, …)."""

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[int, Any] = {}
        self.final: dict[str, Any] | None = None

    def _ended(self) -> bool:
        return self.final is not None

    def _take(self, kind: Any, payload: dict[str, Any]) -> None:
        if kind == "response.output_item.done":
            self.items[position(payload.get("output_index"), len(self.items))] = payload.get("item")
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response")
            self.final = response if isinstance(response, dict) else {}
        elif kind in ("response.failed", "error"):
            response = payload.get("response")
            if kind == "response.failed":
                detail = response.get("error") if isinstance(response, dict) else None
            else:
                detail = payload
            message = detail.get("message") if isinstance(detail, dict) else None
            self._error = str(message or kind)

    def answer(self) -> Answer:
        if self.final is None or self._error is not None:
            return Answer([], failed=True)
        output = self.final.get("output")
        if not output and self.garbled:  # the pieces would be put together without one
            return Answer([], failed=True)
        output = output or [item for _, item in sorted(self.items.items())]
        return answer_from_output(output, self.final.get("usage"), self.final.get("id"))


class ResponsesAdapter(OpenAIErrors):
    wire: Wire = "responses"
    path = "/responses"

    def parse(self, body: Any, reuse: Resend = FRESH) -> ParsedRequest:
        model, stream = model_and_stream(body)
        items = body.get("input", [])
        require(
            isinstance(items, (str, list)), "input must be a string or a list of items", "input"
        )
        if isinstance(items, str):
            messages = [
                Message("user", items, raw={"role": "user", "content": items}, wire="responses")
            ]
        else:
            messages = reuse.parse(items, _parse_input)
        instructions = body.get("instructions")
        require(
            instructions is None or isinstance(instructions, str),
            "instructions must be a string",
            "instructions",
        )
        previous = body.get("previous_response_id")
        require(
            previous is None or isinstance(previous, str),
            "previous_response_id must be a string",
            "previous_response_id",
        )
        return ParsedRequest(
            body, messages, model, stream, continued=bool(previous), instructions=instructions or ""
        )

    def render(self, parsed: ParsedRequest, messages: Sequence[Message]) -> dict[str, Any]:
        return {**parsed.body, "input": [item for m in messages for item in to_wire(m)]}

    def answer_from_json(self, data: Any) -> Answer:
        if not isinstance(data, dict) or data.get("status") == "failed":
            return Answer([], failed=True)
        try:
            return answer_from_output(data.get("output"), data.get("usage"), data.get("id"))
        except Exception:
            return Answer([], failed=True)

    def assembler(self) -> ResponsesAssembler:
        return ResponsesAssembler()

    def stream_error(self, message: str, *, code: str) -> bytes:
        event = {"type": "error", "code": code, "message": message, "param": None}
        return sse_event(event, "error")
