"""What each turn did, kept for a person to read: one `turn` event, and counters per day.

The stored messages say what was said; this says what memlane did about it:
the model and client, the upstream's usage and its cost, how many tokens
governance received and forwarded, and which memories recall injected with
their keyword, dense and final scores. The inspector's timeline shows one
`turn` event per answered (or failed) request; its overview and activity
pages read the counters per day (`Store.add_daily_counts`), which stay cheap
to read however many sessions there are.

Recording happens in the same worker-thread hop and the same transaction that
store the answer (`turn_store.store_answer`): two small writes in its one commit, no
model or LLM call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from memlane.config import Settings
from memlane.engine.turn import Answer, Turn
from memlane.store import Store, StoreError

log = logging.getLogger("memlane.turnlog")

TURN_EVENT = "turn"

# Counter names (one place for each): what the overview shows per day.
REQUESTS = "requests"
FAILED = "failed_requests"
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"
GOVERNED_IN = "governed_tokens_in"
GOVERNED_OUT = "governed_tokens_out"
COMPACTIONS = "compactions"
RECALL_TURNS = "recall_turns"
RECALL_HITS = "recall_hits"
STAGE_FAILURES = "stage_failures"
MEMORIES_ADDED = "memories_added"
MEMORIES_UPDATED = "memories_updated"
MEMORIES_FORGOTTEN = "memories_forgotten"
TURNS_REMEMBERED = "turns_remembered"
COST_MICRO_USD = "cost_micro_usd"
"""Cost is counted in millionths of a dollar: the counters are integers."""


def today(now: datetime | None = None) -> str:
    """The counters' day: the UTC date, `YYYY-MM-DD`."""
    return (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()


def turn_cost(settings: Settings, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for one upstream answer at the configured prices (0 when none is set)."""
    return (
        prompt_tokens * settings.upstream_price_input
        + completion_tokens * settings.upstream_price_output
    ) / 1_000_000


def turn_payload(settings: Settings, turn: Turn, answer: Answer) -> dict[str, Any]:
    """The `turn` event: what a person reads in the timeline."""
    payload: dict[str, Any] = {
        "status": "failed" if answer.failed else "ok",
        "model": turn.model,
        "client": turn.client,
        "wire": turn.wire,
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "cost_usd": round(turn_cost(settings, answer.prompt_tokens, answer.completion_tokens), 8),
    }
    if turn.governed_tokens is not None:
        payload["tokens_in"], payload["tokens_out"] = turn.governed_tokens
    if turn.context is not None:
        payload["limit"] = turn.context[1]
        payload["compacted"] = turn.context[2]
    if turn.window is not None:
        payload["window"], payload["window_source"] = turn.window
    if answer.failed and turn.upstream_error:
        payload["error"] = turn.upstream_error
    if turn.recalled:
        payload["recalled"] = [
            {
                "ref": note.ref,
                "scope": note.scope,
                "keyword": note.keyword,
                "dense": note.dense,
                "score": note.score,
                **({"kind": note.kind} if note.kind != "fact" else {}),
                **({"code": note.code} if note.code else {}),
            }
            for note in turn.recalled
        ]
    return payload


def turn_counts(payload: Mapping[str, Any]) -> dict[str, int]:
    """The counters one `turn` event adds to its day."""
    counts = {
        REQUESTS: 1,
        FAILED: int(payload.get("status") == "failed"),
        PROMPT_TOKENS: int(payload.get("prompt_tokens", 0)),
        COMPLETION_TOKENS: int(payload.get("completion_tokens", 0)),
        COMPACTIONS: int(bool(payload.get("compacted"))),
        COST_MICRO_USD: round(float(payload.get("cost_usd", 0.0)) * 1_000_000),
    }
    if "tokens_in" in payload:
        counts[GOVERNED_IN] = int(payload["tokens_in"])
        counts[GOVERNED_OUT] = int(payload["tokens_out"])
    recalled = payload.get("recalled") or []
    counts[RECALL_TURNS] = int(bool(recalled))
    counts[RECALL_HITS] = len(recalled)
    return counts


def record_turn(
    store: Store, settings: Settings, turn: Turn, answer: Answer, *, stored: bool = False
) -> None:
    """Write the turn's event and its day's counters; a failure is logged, never raised
    (the answer is stored already: this record is for people, not for the request).
    `stored`: the answer's messages were just stored in this transaction, which marked
    the session active (`Store.add_event`'s `active`)."""
    if turn.session is None:
        return
    payload = turn_payload(settings, turn, answer)
    try:
        store.add_event(turn.session.id, TURN_EVENT, payload, active=not stored)
        store.add_daily_counts(today(), turn_counts(payload))
    except StoreError as exc:
        log.warning("turn record of session %s not kept: %s", turn.session.id[:8], exc)


def count(store: Store, counts: Mapping[str, int]) -> None:
    """Add to today's counters (memory writes, stage failures); logged, never raised."""
    try:
        store.add_daily_counts(today(), counts)
    except StoreError as exc:
        log.warning("daily counters not updated: %s", exc)
