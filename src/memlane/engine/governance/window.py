"""Pass 2: keep the head and a recent tail, replace the middle by a summary.

The head is the first run, up to its first text answer (however many tool
messages it spans); it is chosen once and kept for the life of the session.
The tail is the newest items that fit a share of the budget, starting at a
safe cut (see `structure`). The middle is dropped, except the user's current
instruction when it would fall inside it: an agentic turn can outlast many
compactions, and the model must still see what it is working on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memlane.engine.governance.plan import Plan
from memlane.engine.governance.structure import (
    first_run_end,
    group_bounds,
    is_user_turn,
    last_user_turn,
    leading_instructions,
)
from memlane.types import Message


@dataclass(frozen=True, slots=True)
class Window:
    head: int
    dropped: int
    pinned: tuple[int, ...]
    masked: tuple[int, ...] = ()
    """Tool results kept in the tail as their preview: whole, they would not have fit."""


def choose_head(
    conversation: Sequence[Message], counts: Sequence[int], cuts: Sequence[bool], most: int
) -> int:
    """The first run, or only the instructions and first user message when that is too big."""
    head = first_run_end(conversation, cuts)
    if sum(counts[:head]) <= most:
        return head
    start = leading_instructions(conversation)
    if start < len(conversation) and is_user_turn(conversation[start]):
        end = group_bounds(conversation, start)[1]
        if cuts[end]:
            return end
    return start


def choose(
    conversation: Sequence[Message],
    counts: Sequence[int],
    cuts: Sequence[bool],
    plan: Plan,
    *,
    head: int,
    tail_budget: int,
    shrunk: Sequence[int] | None = None,
) -> Window:
    """Where the dropped middle ends (the tail starts), never before what is already dropped.

    The tail is filled newest first up to `tail_budget`, one span between two safe
    cuts at a time (a tool call with its results, a text turn), so a call is never kept
    without its result. `shrunk[i]` is what item `i` costs as a preview (tool results;
    the full count for the rest): a span that does not fit whole goes in with its tool
    results as previews rather than ending the tail there.
    """
    n = len(conversation)
    floor = max(head, plan.dropped)
    newest_cut = max((i for i in range(floor, n) if cuts[i]), default=n)
    start = newest_cut
    used = sum(counts[newest_cut:])
    previews: list[int] = []
    for cut in range(newest_cut - 1, floor - 1, -1):
        if not cuts[cut]:
            continue
        span = range(cut, start)
        whole = sum(counts[i] for i in span)
        if used + whole <= tail_budget:
            used += whole
        elif shrunk is not None and used + sum(shrunk[i] for i in span) <= tail_budget:
            used += sum(shrunk[i] for i in span)
            previews += [i for i in span if shrunk[i] < counts[i]]
        else:
            break
        start = cut
    pinned: tuple[int, ...] = ()
    user = last_user_turn(conversation)
    if user is not None:
        first, end = group_bounds(conversation, user)  # the whole wire message, if blocks
        if head <= first and end <= start and cuts[first] and cuts[end]:
            pinned = tuple(range(first, end))
    masked = tuple(sorted(previews))
    return Window(head=head, dropped=start, pinned=pinned, masked=masked)
