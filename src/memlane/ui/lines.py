"""One line for people per stored event: what the activity feed and a session's timeline
show instead of the event's raw payload (which stays one click away)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlane.engine import turnlog
from memlane.engine.failopen import EVENT as STAGE_FAILED
from memlane.engine.governance.ledger import EVENT_COMPACTED, EVENT_LOOP
from memlane.engine.governance.report import describe_event
from memlane.engine.sessions.indexing import INDEX_EVENT
from memlane.types import Event


def plural(number: int, noun: str, nouns: str | None = None) -> str:
    """`1 session`, `2 sessions`, `1,204 tokens`; `nouns` for an irregular plural."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {nouns or noun + 's'}"


def event_line(event: Event) -> str:
    """What happened, in one line."""
    p = event.payload
    if event.kind == turnlog.TURN_EVENT:
        return _turn(p)
    if event.kind == EVENT_COMPACTED:
        return "compaction: " + describe_event(p)
    if event.kind == INDEX_EVENT:
        return _indexed(p)
    if event.kind == EVENT_LOOP:
        return f"loop warning: {p.get('tool')} called {p.get('count')} times"
    if event.kind == STAGE_FAILED:
        return f"{p.get('stage')} skipped: {str(p.get('error', ''))[:160]}"
    return event.kind


def _turn(p: Mapping[str, Any]) -> str:
    recalled = len(p.get("recalled") or [])
    parts = [
        f"{p.get('model') or 'model ?'}",
        f"{p.get('prompt_tokens', 0)} in / {p.get('completion_tokens', 0)} out",
    ]
    if "tokens_in" in p:
        parts.append(f"governed {p['tokens_in']} → {p['tokens_out']}")
    if recalled:
        parts.append(f"{plural(recalled, 'memory', 'memories')} recalled")
    if p.get("status") == "failed":
        parts.insert(0, "FAILED")
    return " · ".join(parts)


def _indexed(p: Mapping[str, Any]) -> str:
    """A session-indexing attempt: what it cost, or why it failed."""
    attempt = f"attempt {p.get('attempt', '?')}"
    if not p.get("success"):
        return f"session indexing failed ({attempt}): {str(p.get('error', ''))[:160]}"
    usage = p.get("usage") or {}
    cost = p.get("cost_usd") or 0.0
    priced = f", ${cost:.4f}" if cost else ""
    return (
        f"session indexed by {p.get('model') or 'model ?'} ({attempt}, "
        f"{usage.get('prompt_tokens', 0):,} in / {usage.get('completion_tokens', 0):,} out{priced})"
    )
