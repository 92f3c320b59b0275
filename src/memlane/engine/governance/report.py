"""What a compaction did, as one `governance.compacted` event a person can read.

Each compaction (automatic, or `memlane sessions compact`) records the
request's tokens before and after, the budget it was brought under, the tool
results it masked and the span it dropped (how many items of which kind, their
tokens), and what stands for that span now (the summariser's snapshot, kept in
the event, or the static marker). `memlane sessions context` lists the newest
ones; the web inspector shows them in a session's timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlane.engine.governance.budget import Budget
from memlane.engine.governance.cache import Stats
from memlane.engine.governance.plan import Plan

SNAPSHOT_EVENT_CHARS = 20_000
"""Characters of the snapshot kept in its compaction event (what a person reads later)."""


def context_event(
    stats: Stats, plan: Plan, budget: Budget, *, before: int, after: int, manual: bool = False
) -> dict[str, Any]:
    """The payload of one `governance.compacted` event."""
    payload: dict[str, Any] = {
        "tokens_before": before,
        "tokens_after": after,
        "limit": budget.limit,
        "target": budget.target,
        "manual": manual,
        "compaction": plan.compactions,
        "head": plan.head if plan.trims else 0,
        "dropped": plan.dropped if plan.trims else 0,
        "newly_dropped": stats.dropped,
        "removed_tokens": stats.dropped_tokens,
        "dropped_span": list(stats.dropped_span) if stats.dropped_span else None,
        "dropped_kinds": dict(sorted(stats.dropped_kinds.items())),
        "masked": {"items": stats.masked, "tokens_saved": stats.masked_tokens},
        "stands_for": stats.snapshot or ("kept" if plan.trims else "none"),
        "snapshot_chars": len(plan.snapshot) if plan.trims else 0,
        "snapshot": plan.snapshot[:SNAPSHOT_EVENT_CHARS] if stats.dropped else "",
    }
    if stats.tail_budget:
        payload["tail"] = {"tokens": stats.tail_tokens, "budget": stats.tail_budget}
    return payload


def describe_event(payload: Mapping[str, Any]) -> str:
    """One line for people: `61,204 -> 30,877 tokens; 41 items #3-#44 dropped (…) …`."""
    parts = [f"{payload.get('tokens_before', 0):,} -> {payload.get('tokens_after', 0):,} tokens"]
    if payload.get("newly_dropped"):
        kinds = ", ".join(f"{n} {k}" for k, n in (payload.get("dropped_kinds") or {}).items())
        span = payload.get("dropped_span") or []
        where = f" #{span[0]}-#{span[1]}" if len(span) == 2 else ""
        parts.append(
            f"{_counted(payload['newly_dropped'], 'item')}{where} dropped ({kinds}; "
            f"{payload.get('removed_tokens', 0):,} tokens) into the {payload.get('stands_for')}"
        )
    masked = payload.get("masked") or {}
    if masked.get("items"):
        parts.append(
            f"{_counted(masked['items'], 'tool output')} masked "
            f"(-{masked.get('tokens_saved', 0):,} tokens)"
        )
    if payload.get("manual"):
        parts.append("manual")
    return "; ".join(parts)


def _counted(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"
