"""A session's conversation as plain text, for the cheap models that read it.

Only what people said counts: user prompts and the assistant's text answers.
Tool calls, tool results, reasoning and memlane's own injected items are left
out (they are verbose and say little about what the session was about). When
the text is too long the most recent part is kept, cut at a line boundary.
"""

from __future__ import annotations

from collections.abc import Iterable

from memlane.types import Message, MessageText, StoredMessage

OMITTED = "[… earlier conversation omitted …]"
_LABELS = {"user": "User", "assistant": "Assistant"}


def is_conversation(message: Message | MessageText) -> bool:
    """User and assistant text written by the client: what indexing and queries read."""
    return (
        message.origin == "client"
        and message.kind == "message"
        and message.role in _LABELS
        and bool(message.text.strip())
    )


def serialize(messages: Iterable[Message | StoredMessage | MessageText]) -> str:
    """`User: …` / `Assistant: …` blocks separated by blank lines, oldest first."""
    blocks: list[str] = []
    for item in messages:
        message = item.message if isinstance(item, StoredMessage) else item
        if is_conversation(message):
            blocks.append(f"{_LABELS[message.role]}: {message.text.strip()}")
    return "\n\n".join(blocks)


def keep_tail(text: str, max_chars: int) -> str:
    """The last `max_chars` characters of `text`, starting at a line, marked as cut."""
    if len(text) <= max_chars:
        return text
    budget = max(0, max_chars - len(OMITTED) - 1)
    tail = text[len(text) - budget :]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) - 1:
        tail = tail[newline + 1 :]
    return f"{OMITTED}\n{tail}"
