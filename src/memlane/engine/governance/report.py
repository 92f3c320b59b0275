"""What a compaction did, as one `governance.context` event a person can read.

Each compaction (automatic, or `memlane sessions compact`) records the
request's tokens before and after, the budget it was brought under, the tool
results it masked and the span it dropped (how many items of which kind, their
tokens), and what stands for that span now (the summariser's snapshot or the
static marker). `memlane sessions context` lists the newest ones.
"""

from __future__ import annotations

from typing import Any

from memlane.engine.governance.budget import Budget
from memlane.engine.governance.cache import Stats
from memlane.engine.governance.plan import Plan


def context_event(
    stats: Stats, plan: Plan, budget: Budget, *, before: int, after: int, manual: bool = False
) -> dict[str, Any]:
    """The payload of one `governance.context` event."""
    payload: dict[str, Any] = {
        "tokens_before": before,
        "tokens_after": after,
        "limit": budget.limit,
        "target": budget.target,
        "manual": manual,
        "compaction": plan.compactions,
        "masked": {"items": stats.masked, "tokens_saved": stats.masked_tokens},
        "dropped": {
            "items": stats.dropped,
            "tokens": stats.dropped_tokens,
            "span": list(stats.dropped_span) if stats.dropped_span else None,
            "kinds": dict(sorted(stats.dropped_kinds.items())),
        },
        "snapshot": stats.snapshot or ("kept" if plan.trims else "none"),
        "head_items": plan.head if plan.trims else 0,
        "dropped_through": plan.dropped if plan.trims else 0,
    }
    if stats.tail_budget:
        payload["tail"] = {"tokens": stats.tail_tokens, "budget": stats.tail_budget}
    return payload


def describe_event(payload: dict[str, Any]) -> str:
    """One line for people: `61,204 -> 30,877 tokens: 41 items dropped (…), 3 outputs masked`."""
    parts = [f"{payload.get('tokens_before', 0):,} -> {payload.get('tokens_after', 0):,} tokens"]
    dropped = payload.get("dropped") or {}
    if dropped.get("items"):
        kinds = ", ".join(f"{n} {k}" for k, n in (dropped.get("kinds") or {}).items())
        span = dropped.get("span") or []
        where = f" #{span[0]}-#{span[1]}" if len(span) == 2 else ""
        parts.append(
            f"{dropped['items']} items{where} dropped ({kinds}; {dropped.get('tokens', 0):,} "
            f"tokens) into the {payload.get('snapshot')}"
        )
    masked = payload.get("masked") or {}
    if masked.get("items"):
        parts.append(
            f"{masked['items']} tool outputs masked (-{masked.get('tokens_saved', 0):,} tokens)"
        )
    if payload.get("manual"):
        parts.append("manual")
    return "; ".join(parts)
