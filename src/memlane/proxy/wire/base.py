"""What a wire format must provide so the proxy can serve it; the engine never sees wire details.

A `WireAdapter` turns a request body into memlane's `Message` list and back,
reads the upstream's answer (whole or streamed) into an `Answer`, and shapes
errors the way its clients expect. Chat Completions, Responses and Anthropic
Messages are built in; another format is one more module with one more adapter,
registered in `proxy.wire`.

An unchanged message is rendered back as exactly the wire item the client sent
(`Message.raw`), and a request nothing was added to is forwarded as the very
bytes the client sent: that is what keeps provider prompt caches hitting.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from memlane.engine.turn import Answer
from memlane.text.sse import encode
from memlane.types import Message, Wire
from memlane.types.resent import FRESH, Resend


class WireError(Exception):
    """The request body is not what the wire format allows (a 400 for the client)."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ParsedRequest:
    """A request body and what memlane read from it."""

    body: Mapping[str, Any]
    messages: list[Message]
    model: str
    stream: bool
    continued: bool = False
    """The body chains onto a conversation the upstream keeps (Responses `previous_response_id`)."""
    instructions: str = ""


class StreamAssembler(Protocol):
    """Reads the upstream's server-sent events as they pass, to rebuild the final answer."""

    def feed(self, event: str | None, data: str) -> None: ...

    @property
    def complete(self) -> bool:
        """The stream's final event was seen (`[DONE]`, `response.completed`, an error…)."""
        ...

    @property
    def error(self) -> str | None:
        """The error the upstream reported inside the stream, if any."""
        ...

    def answer(self) -> Answer:
        """The assembled answer; `failed` when the stream did not finish properly."""
        ...


class EventAssembler(ABC):
    """What the built-in assemblers share: each event's data read as a JSON object, the
    error the stream reported, and `complete` once the stream ended or failed. An event
    memlane cannot read is relayed as it is; one that may be a piece of the answer
    (`_may_be_a_piece`) marks the stream `garbled`: an answer put together from its
    pieces would lack that one, so it is not stored as whole."""

    def __init__(self) -> None:
        self._error: str | None = None
        self.garbled = False
        """An event's data was not JSON (not even an empty line, nor the end marker)."""

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def complete(self) -> bool:
        return self._ended() or self._error is not None

    def feed(self, event: str | None, data: str) -> None:
        try:
            payload = orjson.loads(data)  # one event per piece of the answer: 7.9 -> 2.6 µs each
        except orjson.JSONDecodeError:  # what it refuses: a lone surrogate, NaN, too deep …
            try:
                payload = loads(data)
            except (ValueError, RecursionError):  # not an event memlane can read: relayed as is
                self.garbled = self.garbled or (bool(data.strip()) and self._may_be_a_piece(event))
                return
        if isinstance(payload, dict):
            self._take(payload.get("type", event), payload)

    def _may_be_a_piece(self, event: str | None) -> bool:
        """Whether an event named `event` (its SSE name) may carry a piece of the answer:
        any may, unless the format names its events (`MessagesAssembler`)."""
        return True

    @abstractmethod
    def _take(self, kind: Any, payload: dict[str, Any]) -> None:
        """Learn from one event: `kind` is its `type` (else its SSE event name)."""

    @abstractmethod
    def _ended(self) -> bool:
        """The stream's final event was seen."""


class WireAdapter(Protocol):
    wire: Wire
    path: str
    """The upstream path, relative to the upstream base URL (e.g. `/chat/completions`)."""

    def parse(self, body: Any, reuse: Resend = FRESH) -> ParsedRequest:
        """Read a decoded JSON body; raise `WireError` when it is not a valid request.
        `reuse`: the messages of items the client sent before (`types.resent`)."""
        ...

    def render(self, parsed: ParsedRequest, messages: Sequence[Message]) -> dict[str, Any]:
        """The body to forward: the client's body with its messages replaced by `messages`."""
        ...

    def answer_from_json(self, data: Any) -> Answer:
        """The final answer in a non-streamed upstream response."""
        ...

    def assembler(self) -> StreamAssembler: ...

    def error_body(
        self, message: str, *, type: str, code: str | None, param: str | None = None
    ) -> dict[str, Any]:
        """An error in the shape this format's clients understand."""
        ...

    def stream_error(self, message: str, *, code: str) -> bytes:
        """An error event to end a stream with, once the response status is already sent."""
        ...


def openai_error(
    message: str, *, type: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object, which Chat Completions and Responses clients both parse."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class OpenAIErrors:
    """`error_body` for the formats whose clients parse OpenAI's error object."""

    def error_body(
        self, message: str, *, type: str, code: str | None, param: str | None = None
    ) -> dict[str, Any]:
        return openai_error(message, type=type, code=code, param=param)


def dumps(data: Any) -> bytes:
    """Compact, deterministic JSON: the same items always give the same bytes.

    Every forwarded body memlane changed is written here, in front of the upstream: orjson
    writes a 20-message request in 3 µs where `json.dumps` takes 74 (a 200-message one
    24 µs against 680). What orjson refuses (an integer beyond 64 bits, a key that is not
    a string) is written by `json.dumps`, as before.
    """
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sse_event(data: Any, name: str | None = None) -> bytes:
    """One server-sent event (named `name`, when its format names events) whose data is
    `data` as compact JSON: what memlane writes into a stream itself."""
    return encode([(name, dumps(data).decode("utf-8"))])


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads(raw: bytes | str) -> Any:
    """`json.loads` of UTF-8 JSON text, with every lone UTF-16 surrogate replaced by U+FFFD.

    JSON may spell half of a surrogate pair (`"\\ud83d"`, what a client that cut a
    string inside an emoji sends); Python decodes it to a code point no UTF-8 text can
    hold, and every later encode (the store, the files, the upstream) would fail on it.
    Only bodies that contain such an escape pay for the second pass. Bytes must be
    UTF-8 (`json.loads` alone would let encoded surrogates through): anything else
    raises `UnicodeDecodeError`, a `ValueError`.

    orjson reads it first (every request's body: the stdlib's parser cost about 3% of
    the HTTP face's CPU); it refuses lone surrogates, NaN and integers past 64 bits, and
    what it refuses takes the stdlib's path, which accepts or rejects as it always did.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    data = json.loads(text)
    probe = raw if isinstance(raw, bytes) else raw.encode("utf-8", errors="surrogatepass")
    if _SURROGATE_ESCAPE.search(probe) is None:
        return data
    wide = json.dumps(data, ensure_ascii=False).encode("utf-16-le", errors="surrogatepass")
    return json.loads(wide.decode("utf-16-le", errors="replace"))


def token_count(value: Any) -> int:
    """A usage figure as an int; anything else an upstream sends there counts as 0.

    Usage is bookkeeping: an odd value (an object, a string) must never keep the
    answer from being stored, nor the relay from going on.
    """
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return max(int(value), 0)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def position(value: Any, default: int) -> int:
    """An event's index field (`output_index`, a tool call's `index`), or `default` when
    it is no index at all: a copy of the stream must not break on an odd one."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**16:
        return value
    return default


def unchanged(parsed: ParsedRequest, messages: Sequence[Message]) -> bool:
    """True when the engine handed back the very messages parsed (nothing added or edited)."""
    return len(messages) == len(parsed.messages) and all(
        a is b for a, b in zip(messages, parsed.messages, strict=True)
    )


def content_text(content: Any, param: str) -> str:
    """The text of a message content: a string, null, or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(f"{param} must be a string or a list of content parts", param=param)
    pieces: list[str] = []
    for index, part in enumerate(content):
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, dict):
            raise WireError(f"{param}[{index}] must be an object", param=f"{param}[{index}]")
        text = part.get("text", part.get("refusal"))
        if isinstance(text, str):
            pieces.append(text)
        elif "image" in str(part.get("type", "")):
            pieces.append("[image]")
        elif "file" in str(part.get("type", "")):
            pieces.append("[file]")
    return "\n".join(pieces)


def require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise WireError(message, param=param)


def message_role(item: Any, param: str, roles: frozenset[str]) -> str:
    """The role of a message item `param`, once the item is an object and the role one of
    `roles` (a `WireError` naming what is wrong otherwise)."""
    if not isinstance(item, dict):
        raise WireError(f"{param} must be an object", param=param)
    role = item.get("role")
    if not (isinstance(role, str) and role in roles):  # the message is built only when wrong
        raise WireError(
            f"{param}.role must be one of {', '.join(sorted(roles))}", param=f"{param}.role"
        )
    return role


def model_and_stream(body: Any) -> tuple[str, bool]:
    """A request body's `model` and `stream`, once it is checked to be a JSON object."""
    require(isinstance(body, dict), "the request body must be a JSON object", "body")
    model = body.get("model", "")
    require(isinstance(model, str), "model must be a string", "model")
    stream = body.get("stream", False)
    require(stream is None or isinstance(stream, bool), "stream must be a boolean", "stream")
    return model, bool(stream)
