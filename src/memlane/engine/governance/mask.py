"""Pass 1: old, large tool outputs leave the request; a preview and a pointer stay.

A tool result older than the protection window and larger than
`governance_tool_output_limit` tokens is offloaded (the session folder and the
event log keep it whole) and shown as its head and tail plus a marker naming
where the full output is. Its call id and tool name stay, so the history stays
valid in every wire format. A result larger than the whole tail budget is
masked even inside the protection window: it could never fit.

The preview is a pure function of the output and the settings, so the same
masked result is forwarded byte-identically on every request.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from memlane.config import Settings
from memlane.engine.governance.budget import Budget
from memlane.types import Message


def preview(text: str, chars: int, tokens: int, reference: str) -> str:
    head_chars = chars * 2 // 3
    tail_chars = chars - head_chars
    omitted = len(text) - head_chars - tail_chars
    marker = (
        f"[memlane: tool output trimmed to fit the context window: {len(text)} chars "
        f"(~{tokens} tokens). The full output is at {reference}]"
    )
    if omitted <= 0:
        return f"{marker}\n{text}"
    tail = text[-tail_chars:] if tail_chars else ""
    return f"{marker}\n{text[:head_chars]}\n[… {omitted} chars omitted …]\n{tail}"


def masked(message: Message, settings: Settings, tokens: int, reference: str) -> Message:
    return message.with_text(
        preview(message.text, settings.governance_preview_chars, tokens, reference)
    )


def choose(
    conversation: Sequence[Message],
    counts: Sequence[int],
    settings: Settings,
    budget: Budget,
    already: Mapping[int, str],
    skip: Collection[int] = (),
) -> list[int]:
    """Indices of tool results to mask now, oldest first (`skip`: already dropped)."""
    if settings.governance_tool_output_limit <= 0:
        return []
    limit = budget.tool_output
    protect_from = protection_start(counts, settings.governance_protect_tokens)
    chosen: list[int] = []
    for index in range(len(conversation)):
        item = conversation[index]
        if item.kind != "tool_result" or index in already or index in skip:
            continue
        size = counts[index]
        if size > budget.tail or (index < protect_from and size > limit):
            chosen.append(index)
    return chosen


def protection_start(counts: Sequence[int], protect: int) -> int:
    """First index of the newest `protect` tokens."""
    used = 0
    for index in range(len(counts) - 1, -1, -1):
        used += counts[index]
        if used > protect:
            return index + 1
    return 0
