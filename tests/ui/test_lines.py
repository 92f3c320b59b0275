"""One line for people per stored event (`ui.lines`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memlane.engine.governance.ledger import EVENT_COMPACTED
from memlane.engine.sessions.indexing import INDEX_EVENT
from memlane.engine.turnlog import TURN_EVENT
from memlane.types import Event
from memlane.ui.lines import event_line, plural


def event(kind: str, payload: dict[str, Any]) -> Event:
    return Event(1, "s", kind, payload, "", datetime(2026, 11, 1, tzinfo=UTC))


def test_plural_says_one_of_a_thing_in_the_singular() -> None:
    assert plural(1, "session") == "1 session"
    assert plural(0, "session") == "0 sessions"
    assert plural(12_400, "token") == "12,400 tokens"
    assert plural(2, "memory", "memories") == "2 memories"


def test_a_compaction_that_only_masked_says_what_it_masked() -> None:
    payload = {
        "tokens_before": 16_300,
        "tokens_after": 474,
        "newly_dropped": 0,
        "removed_tokens": 0,
        "masked": {"items": 3, "tokens_saved": 15_826},
    }
    line = event_line(event(EVENT_COMPACTED, payload))
    assert line == "compaction: 16,300 -> 474 tokens; 3 tool outputs masked (-15,826 tokens)"


def test_an_indexing_attempt_reads_as_text() -> None:
    done = {
        "success": True,
        "attempt": 1,
        "model": "small",
        "usage": {"prompt_tokens": 1200, "completion_tokens": 80},
        "cost_usd": 0.0004,
    }
    failed = {"success": False, "attempt": 3, "error": "model answered no JSON"}
    assert event_line(event(INDEX_EVENT, done)) == (
        "session indexed by small (attempt 1, 1,200 in / 80 out, $0.0004)"
    )
    assert event_line(event(INDEX_EVENT, failed)) == (
        "session indexing failed (attempt 3): model answered no JSON"
    )


def test_one_recalled_memory_is_one_memory() -> None:
    payload = {"model": "m", "prompt_tokens": 5, "completion_tokens": 2, "recalled": [{}]}
    assert event_line(event(TURN_EVENT, payload)) == "m · 5 in / 2 out · 1 memory recalled"
