"""Apply a plan to a request: the exact message list forwarded upstream.

A pure function of (plan, request, settings): the same inputs give the same
output, item for item, which is what keeps the forwarded prefix byte-stable
between compactions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memlane.config import Settings
from memlane.engine.governance import mask, thoughts
from memlane.engine.governance.plan import Plan
from memlane.types import Message

SUMMARY_TITLE = "[memlane: summary of {count} earlier messages, replaced to fit the context window]"

Counter = Callable[[Message], int]


def summary_message(plan: Plan) -> Message:
    title = SUMMARY_TITLE.format(count=plan.summarised)
    return Message(role="user", text=f"{title}\n{plan.snapshot}", origin="summary")


def apply(
    plan: Plan, messages: Sequence[Message], settings: Settings, count: Counter
) -> list[Message]:
    """The request under `plan`. Items memlane injected (non-client) stay where they are,
    except state blocks inside the dropped span: only the newest of those is still true."""
    out: list[Message] = []
    pinned = set(plan.pinned)
    stale = _stale_state_blocks(plan, messages)
    index = -1
    for position, message in enumerate(messages):
        if message.origin != "client":
            if position not in stale:
                out.append(message)
            continue
        index += 1
        if index == plan.head and plan.trims:
            out.append(summary_message(plan))
        if plan.head <= index < plan.dropped and index not in pinned:
            continue
        item = message
        if index in plan.masked:
            item = mask.masked(message, settings, count(message), plan.masked[index])
        if plan.strip_reasoning and index < plan.head:
            stripped = thoughts.strip(item)
            if stripped is None:
                continue
            item = stripped
        out.append(item)
    return out


def _stale_state_blocks(plan: Plan, messages: Sequence[Message]) -> set[int]:
    """Positions of state blocks in the dropped span that a later block there supersedes."""
    if not plan.trims:
        return set()
    inside: list[int] = []
    before = 0
    for position, message in enumerate(messages):
        if message.origin == "client":
            before += 1
        elif message.origin == "state" and plan.head <= before < plan.dropped:
            inside.append(position)
    return set(inside[:-1])
