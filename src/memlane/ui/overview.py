"""The inspector's overview (what memlane did, per day) and activity (turns as they arrive).

Both read bounded queries: the day counters `engine.turnlog` keeps, and the
newest events of a few kinds across every session (`Store.recent_events`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.requests import Request
from starlette.responses import Response

from memlane.engine import threads, turnlog
from memlane.engine.failopen import EVENT as STAGE_FAILED
from memlane.engine.governance.ledger import EVENT_COMPACTED, EVENT_LOOP
from memlane.engine.runtime import Runtime
from memlane.types import Event, Session
from memlane.ui.lines import event_line
from memlane.ui.render import page
from memlane.ui.sessions import display_title
from memlane.ui.web import PREFIX, Rt, Who, context

router = APIRouter(prefix=PREFIX, include_in_schema=False)

DAYS = 14
ACTIVITY_KINDS = (turnlog.TURN_EVENT, EVENT_COMPACTED, EVENT_LOOP, STAGE_FAILED)
ACTIVITY_ROWS = 50


def day_rows(counts: dict[str, dict[str, int]], today: datetime) -> list[dict[str, Any]]:
    """One row per day, newest first, every day of the window (an idle day shows zeros)."""
    rows = []
    for back in range(DAYS):
        day = (today - timedelta(days=back)).strftime("%Y-%m-%d")
        c = counts.get(day, {})
        governed_in = c.get(turnlog.GOVERNED_IN, 0)
        governed_out = c.get(turnlog.GOVERNED_OUT, 0)
        rows.append(
            {
                "day": day,
                "requests": c.get(turnlog.REQUESTS, 0),
                "failed": c.get(turnlog.FAILED, 0),
                "tokens": c.get(turnlog.PROMPT_TOKENS, 0) + c.get(turnlog.COMPLETION_TOKENS, 0),
                "saved": max(0, governed_in - governed_out),
                "compactions": c.get(turnlog.COMPACTIONS, 0),
                "added": c.get(turnlog.MEMORIES_ADDED, 0),
                "updated": c.get(turnlog.MEMORIES_UPDATED, 0),
                "forgotten": c.get(turnlog.MEMORIES_FORGOTTEN, 0),
                "turns": c.get(turnlog.TURNS_REMEMBERED, 0),
                "recall_turns": c.get(turnlog.RECALL_TURNS, 0),
                "recall_hits": c.get(turnlog.RECALL_HITS, 0),
                "errors": c.get(turnlog.FAILED, 0) + c.get(turnlog.STAGE_FAILURES, 0),
                "cost": c.get(turnlog.COST_MICRO_USD, 0) / 1_000_000,
            }
        )
    return rows


@router.get("")
@router.get("/")
async def overview(request: Request, who: Who, rt: Rt) -> Response:
    now = datetime.now(UTC)
    since = (now - timedelta(days=DAYS - 1)).strftime("%Y-%m-%d")

    def read() -> dict[str, Any]:
        store = rt.store
        return {
            "rows": day_rows(store.daily_counts(since=since), now),
            "sessions": store.page_sessions(limit=1)[1],
            "memories": store.page_facts(limit=1)[1],
        }

    values = await threads.to_thread(read)
    peak = max((r["requests"] for r in values["rows"]), default=0)
    return page(
        request,
        "overview.html",
        context(
            request,
            who,
            "overview",
            peak=max(1, peak),
            process=rt.activity.snapshot(),
            days=DAYS,
            **values,
        ),
    )


def _activity(rt: Runtime, after: int) -> dict[str, Any]:
    events = rt.store.recent_events(kinds=ACTIVITY_KINDS, after_id=after, limit=ACTIVITY_ROWS)
    sessions: dict[str, Session | None] = {}
    for event in events:
        if event.session_id not in sessions:
            sessions[event.session_id] = rt.store.get_session(event.session_id)
    return {
        "events": events,
        "sessions": sessions,
        "after": max((e.id for e in events), default=after),
    }


def describe(event: Event) -> str:
    """One line for the activity feed."""
    return event_line(event)


@router.get("/activity")
async def activity(request: Request, who: Who, rt: Rt) -> Response:
    values = await threads.to_thread(_activity, rt, 0)
    return page(
        request,
        "activity.html",
        context(
            request,
            who,
            "activity",
            describe=describe,
            title_of=display_title,
            process=rt.activity.snapshot(),
            **values,
        ),
    )


@router.get("/activity/live")
async def activity_live(
    request: Request, who: Who, rt: Rt, after: Annotated[int, Query(ge=0)] = 0
) -> Response:
    values = await threads.to_thread(_activity, rt, after)
    return page(
        request,
        "activity_live.html",
        context(request, who, "activity", describe=describe, title_of=display_title, **values),
    )
