"""Answers memlane gives itself, without the upstream, in the client's wire format.

When a turn cannot be forwarded because of something the user wrote (an `@@`
reference that matches no session, or several), the user is told why as a
normal assistant message: a client shows it like any answer, instead of
failing on an HTTP error. Streaming clients get the events they expect.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from memlane.proxy.wire.base import dumps, sse_event
from memlane.types import Wire

MEDIA_SSE = "text/event-stream"


def direct_response(wire: Wire, model: str, text: str, *, stream: bool) -> Response:
    """`text` as the assistant's complete answer, in `wire`, streamed or not."""
    if wire == "anthropic":
        if stream:
            return StreamingResponse(_anthropic_events(model, text), media_type=MEDIA_SSE)
        return Response(dumps(_anthropic_message(model, text)), media_type="application/json")
    if wire == "responses":
        if stream:
            return StreamingResponse(_responses_events(model, text), media_type=MEDIA_SSE)
        return Response(dumps(_response(model, text)), media_type="application/json")
    if stream:
        return StreamingResponse(_chat_chunks(model, text), media_type=MEDIA_SSE)
    return Response(dumps(_completion(model, text)), media_type="application/json")


def _usage_chat() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-memlane-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage_chat(),
    }


def _chat_chunks(model: str, text: str) -> Iterator[bytes]:
    base = {
        "id": f"chatcmpl-memlane-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    deltas: list[tuple[dict[str, Any], str | None]] = [
        ({"role": "assistant", "content": text}, None),
        ({}, "stop"),
    ]
    for delta, finish in deltas:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        yield sse_event(chunk)
    yield sse_event({**base, "choices": [], "usage": _usage_chat()})
    yield b"data: [DONE]\n\n"


def _message_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _response(
    model: str, text: str, *, rid: str | None = None, status: str = "completed"
) -> dict[str, Any]:
    item_id = f"msg_memlane_{uuid.uuid4().hex}"
    return {
        "id": rid or f"resp_memlane_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": [_message_item(item_id, text)] if status == "completed" else [],
        "usage": {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 0,
        },
    }


def _responses_events(model: str, text: str) -> Iterator[bytes]:
    rid = f"resp_memlane_{uuid.uuid4().hex}"
    done = _response(model, text, rid=rid)
    item = done["output"][0]
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response(model, text, rid=rid, status="in_progress")}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
        ("response.output_text.delta", {**where, "delta": text, "logprobs": []}),
        ("response.output_text.done", {**where, "text": text, "logprobs": []}),
        ("response.content_part.done", {**where, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    for sequence, (name, data) in enumerate(events):
        payload = {"type": name, "sequence_number": sequence, **data}
        yield sse_event(payload, name)


def _anthropic_message(model: str, text: str, *, content: bool = True) -> dict[str, Any]:
    return {
        "id": f"msg_memlane_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}] if content else [],
        "stop_reason": "end_turn" if content else None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _anthropic_events(model: str, text: str) -> Iterator[bytes]:
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": _anthropic_message(model, text, content=False)}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"index": 0}),
        (
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 0},
            },
        ),
        ("message_stop", {}),
    ]
    for name, data in events:
        yield sse_event({"type": name, **data}, name)
