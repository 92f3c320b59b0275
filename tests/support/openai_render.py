"""Scripted answers rendered as OpenAI's API renders them: Chat Completions (whole and
streamed chunks), Responses (whole and streamed events), and embeddings.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from typing import Any

from tests.support.scripted import RecordedRequest, Reply, ToolCallSpec

EMBEDDING_DIM = 16


def last_user_text(request: RecordedRequest) -> str:
    for item in reversed(request.messages):
        if item.get("role") == "user":
            content = item.get("content", "")
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


class _Counter:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}_{self._n:06d}"


_ids = _Counter()


def _call_id(spec: ToolCallSpec, index: int) -> str:
    return spec.id or f"call_{index}_{hashlib.sha256(spec.name.encode()).hexdigest()[:8]}"


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(c, i),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    prompt, completion = reply.usage
    return {
        "id": _ids.next("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def chat_chunks(reply: Reply, model: str, *, include_usage: bool) -> list[str]:
    """SSE `data:` payloads of a streamed chat completion, `[DONE]` last."""
    cid, created = _ids.next("chatcmpl"), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning, reply.chunk_size)]
    out += [chunk({"content": p}) for p in _pieces(reply.text, reply.chunk_size)]
    for i, c in enumerate(reply.tool_calls):
        head = {"index": i, "id": _call_id(c, i), "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": c.name, "arguments": ""}}]}))
        for p in _pieces(c.arguments, reply.chunk_size):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if include_usage:
        prompt, completion = reply.usage
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        payload = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        out.append(json.dumps(payload))
    out.append("[DONE]")
    return out


def response_output(reply: Reply) -> list[dict[str, Any]]:
    """The `output` items of a Responses answer: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": _ids.next("rs"),
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
                "encrypted_content": "enc:" + hashlib.sha256(reply.reasoning.encode()).hexdigest(),
            }
        )
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": _ids.next("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, c in enumerate(reply.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": _ids.next("fc"),
                "call_id": _call_id(c, i),
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
        )
    return items


def response_object(
    reply: Reply, model: str, *, rid: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    prompt, completion = reply.usage
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def response_events(reply: Reply, model: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of a streamed Responses answer, like OpenAI's."""
    rid = _ids.next("resp")
    events: list[tuple[str, dict[str, Any]]] = []
    seq = 0

    def emit(kind: str, **data: Any) -> None:
        nonlocal seq
        events.append((kind, {"type": kind, "sequence_number": seq, **data}))
        seq += 1

    start = response_object(reply, model, rid=rid, status="in_progress", output=[])
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    output = response_output(reply)
    for index, item in enumerate(output):
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index, item={**item, "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in _pieces(reply.text, reply.chunk_size):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=reply.text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        elif item["type"] == "function_call":
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in _pieces(item["arguments"], reply.chunk_size):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    done = response_object(reply, model, rid=rid, status="completed", output=output)
    emit("response.completed", response=done)
    return events


def embedding(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(b - 127.5) for b in digest[:EMBEDDING_DIM]]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


def final_response(reply: Reply, model: str) -> dict[str, Any]:
    """A whole (not streamed) Responses answer."""
    return response_object(
        reply, model, rid=_ids.next("resp"), status="completed", output=response_output(reply)
    )
