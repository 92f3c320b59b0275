"""What the scripted upstream can answer, and what it records of each request it receives.

A test scripts replies (`Reply`, `Fail`, `Hang`, `CutStream`, `Raw`) on the
`upstream` fixture (`tests.support.upstream`) and reads back `RecordedRequest`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCallSpec:
    """A function call the scripted assistant makes."""

    name: str
    arguments: str = "{}"
    id: str = ""


@dataclass(frozen=True)
class Reply:
    """A successful answer: text and/or tool calls, optional reasoning, usage."""

    text: str = ""
    tool_calls: tuple[ToolCallSpec, ...] | list[ToolCallSpec] = ()
    reasoning: str = ""
    usage: tuple[int, int] = (11, 7)
    chunk_size: int = 4
    """Characters per streamed text delta (and per arguments delta)."""
    delay: float = 0.0
    """Seconds to wait between streamed events (to observe unbuffered relaying)."""
    latency: float = 0.0
    """Seconds to wait before answering at all (a model's time to first token)."""
    linger: float = 0.0
    """Seconds a stream stays open after its last event (an upstream slow to close it)."""


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer with OpenAI's error body (or `raw_body` verbatim)."""

    status: int = 500
    message: str = "scripted upstream failure"
    type: str = "server_error"
    code: str | None = None
    raw_body: str | None = None


def ContextLengthExceeded(message: str = "maximum context length exceeded") -> Fail:
    """The 400 OpenAI returns when a request does not fit the model's window."""
    return Fail(400, message, "invalid_request_error", "context_length_exceeded")


@dataclass(frozen=True)
class Hang:
    """Answer nothing for `seconds` (a client with a shorter timeout sees a timeout)."""

    seconds: float = 30.0


@dataclass(frozen=True)
class CutStream:
    """Start streaming `reply`, then drop the connection after `after` events."""

    after: int = 2
    reply: Reply = field(default_factory=lambda: Reply(text="this answer will be cut short"))


@dataclass(frozen=True)
class Raw:
    """Answer exactly this: a JSON body, or (for a streamed request) these SSE frames verbatim.

    For upstreams that send what memlane does not expect (odd usage, unknown events).
    """

    body: Any = None
    frames: tuple[str, ...] = ()


Scripted = Reply | Fail | Hang | CutStream | Raw


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Chat `messages` or Responses `input` items (a string input becomes one user item)."""
        if not isinstance(self.json, dict):
            return []
        if "messages" in self.json:
            return list(self.json["messages"])
        items = self.json.get("input", [])
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return list(items)
