"""The one internal message shape every wire format is translated into.

Clients speak Chat Completions, Responses or Anthropic Messages; the engine
only ever sees `Message`. Each message keeps the wire item it came from (`raw`) so that an
unchanged message is forwarded byte-for-byte as the client sent it, which is
what keeps provider prompt caches hitting.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Role = Literal["system", "developer", "user", "assistant", "tool"]
Kind = Literal["message", "tool_call", "tool_result", "reasoning"]
Wire = Literal["chat", "responses", "anthropic", "internal"]
Origin = Literal["client", "state", "summary", "recall", "reference", "note"]

# `json.dumps` with options builds an encoder per call; a fingerprint is taken of every
# message of every request, so one encoder serves them all (the same bytes).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

FINGERPRINT_MEMO_SIZE = 16_384
"""Fingerprints of short messages remembered across requests, keyed by their content."""
FINGERPRINT_MEMO_MAX_CHARS = 2_048
"""Messages up to this many characters (text and call arguments) are remembered, so the
memo holds at most 32 M characters (32 MB of ASCII text), in this process's memory only;
a longer message (a tool output) is hashed each time."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the assistant asked for."""

    id: str
    name: str
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """A conversation item, independent of the wire format it travelled in.

    `kind` says what the item is for the model: text, a request to call tools,
    a tool's result, or reasoning. `origin` says who wrote it: the client, or
    memlane itself (the state block, a summary, recalled snippets, an `@@`
    reference, a loop note) — memlane's own items are never mistaken for the
    user's words.
    """

    role: Role
    text: str = ""
    kind: Kind = "message"
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None
    name: str | None = None
    raw: Mapping[str, Any] | None = field(default=None, compare=False)
    wire: Wire = "internal"
    origin: Origin = "client"
    continues: bool = False
    """The item is a further content block of the same wire message as the item before it
    (Anthropic Messages: one item per block). Governance never cuts between the two: a turn
    is kept or dropped whole."""
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)
    """`fingerprint()` once taken: a request's messages are fingerprinted to shape it, to
    store it and to check its compaction plan (a copy made by `replace` takes it anew)."""
    _tokens: tuple[str, int] | None = field(default=None, init=False, repr=False, compare=False)
    """`(encoding, tokens)` once a tokenizer counted the message: a resent message is
    handed to each request's governance as the same object (`types.resent`), and counted
    once (a copy made by `replace` is counted anew)."""

    def fingerprint(self) -> str:
        """Content hash used to recognise a message a client sends again.

        Only what the model reads counts (role, kind, text, calls), so a client
        that re-serialises the same message slightly differently still matches.
        """
        found = self._fingerprint
        if found is None:
            found = self._digest()
            object.__setattr__(self, "_fingerprint", found)
        return found

    def counted(self, encoding: str) -> int | None:
        """The tokens `encoding` counted in this message before, if it did."""
        found = self._tokens
        return found[1] if found is not None and found[0] == encoding else None

    def note_count(self, encoding: str, tokens: int) -> None:
        """Remember what `encoding` counts in this message (`counted`)."""
        object.__setattr__(self, "_tokens", (encoding, tokens))

    def _digest(self) -> str:
        # Clients resend their whole history: every request parses new `Message`s for
        # the same turns, and encoding and hashing each again was most of what finding
        # a turn's edit point cost. A content-keyed memo finds them in a dict lookup.
        # Taken for every message of every request: a message without calls (most) is
        # sized without a generator.
        calls = self.tool_calls
        size = len(self.text) + (sum(len(c.arguments) for c in calls) if calls else 0)
        digest = _remembered if size <= FINGERPRINT_MEMO_MAX_CHARS else _content_digest
        return digest(self.role, self.kind, self.text, calls, self.call_id)

    def with_text(self, text: str) -> Message:
        """A copy with new text; the wire item is dropped because it no longer matches."""
        return replace(self, text=text, raw=None)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The call ids this item opens (tool calls) or closes (a tool result)."""
        if self.tool_calls:
            return tuple(c.id for c in self.tool_calls)
        if self.call_id is not None:
            return (self.call_id,)
        return ()

    @property
    def is_transcript(self) -> bool:
        """User prompts and final assistant answers: what a replay shows by default."""
        if self.origin != "client":
            return False
        if self.role == "user" and self.kind == "message":
            return True
        return self.role == "assistant" and self.kind == "message" and bool(self.text)


def _content_digest(
    role: str, kind: str, text: str, tool_calls: tuple[ToolCall, ...], call_id: str | None
) -> str:
    canonical = _CANONICAL.encode(
        [role, kind, text, [[c.id, c.name, c.arguments] for c in tool_calls], call_id]
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_remembered = functools.lru_cache(maxsize=FINGERPRINT_MEMO_SIZE)(_content_digest)


def remembered_fingerprints() -> int:
    """How many fingerprints the memo holds (bounded by `FINGERPRINT_MEMO_SIZE`)."""
    return _remembered.cache_info().currsize


def forget_fingerprints() -> None:
    """Drop every remembered fingerprint, and the texts it was keyed by: a deleted session's
    words leave this process's memory too, not only the store."""
    _remembered.cache_clear()
