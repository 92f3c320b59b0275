"""Thought stripping: reasoning of finished turns leaves the compacted part of the history.

Reasoning is the model's scratch work; once a turn is answered, later turns do
not need it, and it costs tokens. It is removed only where a compaction
already rewrote the history (the kept head), never between compactions, so it
never breaks the cached prefix. Reasoning of the turn still in progress (for
instance encrypted reasoning items in an unfinished tool loop, which the
upstream needs to continue) is kept.
"""

from __future__ import annotations

from dataclasses import replace

from memlane.types import Message

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking", "reasoning_details")
"""Fields some chat servers attach to assistant messages for the model's reasoning."""


def strip(message: Message) -> Message | None:
    """The message without reasoning; None when the message is nothing but reasoning.

    Anthropic thinking blocks stay: each is part of an assistant turn whose signature the
    API checks, and a turn that is kept is kept byte for byte.
    """
    if message.wire == "anthropic":
        return message
    if message.kind == "reasoning":
        return None
    raw = message.raw
    if raw is not None and message.role == "assistant" and any(k in raw for k in REASONING_KEYS):
        return replace(message, raw={k: v for k, v in raw.items() if k not in REASONING_KEYS})
    return message
