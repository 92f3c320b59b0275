"""Where a conversation may be cut without breaking it.

A cut between two items is safe when no tool call opened before it is answered
after it (chat `tool_calls` / `tool` messages, responses `function_call` /
`function_call_output` items and Anthropic `tool_use` / `tool_result` blocks alike,
parallel calls included), when it does not leave a tool result first, when it does
not separate a reasoning item from the call or answer it belongs to (reasoning
always precedes its item), and when it does not fall inside one wire message
(Anthropic content blocks: a turn is kept or dropped whole, never edited).
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.types import Message


def safe_cuts(items: Sequence[Message]) -> list[bool]:
    """`cuts[i]` says whether the list may be split just before item `i` (0 ≤ i ≤ len)."""
    n = len(items)
    opened: dict[str, int] = {}
    closed: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.kind == "tool_result" and item.call_id is not None:
            closed[item.call_id] = index
        else:
            for call_id in item.call_ids:
                opened.setdefault(call_id, index)
    # A call answered at `last` forbids every cut in (first, last].
    delta = [0] * (n + 2)
    for call_id, first in opened.items():
        last = closed.get(call_id)
        if last is not None and last > first:
            delta[first + 1] += 1
            delta[last + 1] -= 1
    cuts = [True] * (n + 1)
    depth = 0
    for i in range(n + 1):
        depth += delta[i]
        if depth > 0 or (
            0 < i < n
            and (
                items[i].kind == "tool_result"
                or items[i].continues
                or items[i - 1].kind == "reasoning"
            )
        ):
            cuts[i] = False
    return cuts


def is_user_turn(item: Message) -> bool:
    return item.role == "user" and item.kind == "message"


def group_bounds(items: Sequence[Message], index: int) -> tuple[int, int]:
    """[start, end) of the wire message item `index` belongs to (itself for one-item ones)."""
    start = index
    while start > 0 and items[start].continues:
        start -= 1
    end = index + 1
    while end < len(items) and items[end].continues:
        end += 1
    return start, end


def leading_instructions(items: Sequence[Message]) -> int:
    """How many items at the start are system / developer instructions."""
    count = 0
    for item in items:
        if item.role not in ("system", "developer") or item.kind != "message":
            break
        count += 1
    return count


def first_run_end(items: Sequence[Message], cuts: Sequence[bool]) -> int:
    """End of the head: the first run, up to and including its first text answer.

    The first run may span many tool calls before the assistant answers in
    text. A session whose first run never answered in text (only tool calls so
    far) keeps its instructions and its first user message as the head.
    """
    start = leading_instructions(items)
    for index in range(start, len(items)):
        item = items[index]
        if item.role == "assistant" and item.kind == "message" and item.text.strip():
            end = group_bounds(items, index)[1]
            if cuts[end] and all(i.kind != "tool_call" for i in items[index:end]):
                return end
            if not any(i.continues for i in items[index:end]):
                break
    if start < len(items) and is_user_turn(items[start]):
        end = group_bounds(items, start)[1]
        if cuts[end]:
            return end
    return start


def last_user_turn(items: Sequence[Message]) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if is_user_turn(items[index]):
            return index
    return None
