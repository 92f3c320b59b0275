"""One session's timeline: its stored messages and events, merged in time and paired up.

A pure function of what the store holds, so the page and its live updates
build it the same way:

- each tool call carries the results that answer it (by call id), and a
  result governance masked carries the id of the event that kept its full
  text (the page links to it);
- a compaction carries the items it dropped (the `governance.dropped` events
  recorded just before it), its snapshot, and the tokens before and after it
  (after: from the turn record of the same request);
- a turn record (`engine.turnlog`) carries usage, cost, governance's tokens
  and the memories recall injected with their scores;
- every other event (a loop warning, a failed stage, an index run) is shown
  as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlane.engine.failopen import EVENT as STAGE_FAILED
from memlane.engine.governance.ledger import (
    EVENT_COMPACTED,
    EVENT_DROPPED,
    EVENT_INFLATED,
    EVENT_LOOP,
    EVENT_OFFLOADED,
    EVENT_SUMMARY_FAILED,
)
from memlane.engine.sessions.indexing import INDEX_EVENT
from memlane.engine.turnlog import TURN_EVENT
from memlane.types import Event, StoredMessage

ORIGINS = {
    "client": "client",
    "state": "scaffold",
    "summary": "summary",
    "recall": "recall",
    "reference": "reference",
    "note": "note",
}
"""How each message origin is named on the page."""

EVENT_TITLES = {
    EVENT_LOOP: "loop warning",
    STAGE_FAILED: "stage failed",
    EVENT_INFLATED: "summary rolled back (not smaller)",
    EVENT_SUMMARY_FAILED: "summariser failed",
    INDEX_EVENT: "session indexed",
}


@dataclass
class Result:
    message: StoredMessage
    offload_id: int | None = None


@dataclass
class Item:
    """One row of the timeline; `kind` picks its template block."""

    kind: str  # "message" | "turn" | "compaction" | "event"
    created_at: datetime
    message: StoredMessage | None = None
    results: list[Result] = field(default_factory=list)
    offload_id: int | None = None
    event: Event | None = None
    dropped: list[Event] = field(default_factory=list)
    tokens_after: int | None = None
    title: str = ""

    @property
    def anchor(self) -> str:
        """The row's `id` on the page, what a link to it names: a message, an event, or
        (dropped items without a compaction record) the first item dropped."""
        if self.message is not None:
            return f"m{self.message.id}"
        if self.event is not None:
            return f"e{self.event.id}"
        return f"c{self.dropped[0].id}"

    @property
    def classes(self) -> str:
        """The row's CSS classes besides `item`: its kind, and what the page styles by
        (a message's role, origin, kind and status; a failed turn; an event's kind)."""
        if self.message is not None:
            m, status = self.message.message, self.message.status
            classes = f"msg role-{m.role} origin-{m.origin} kind-{m.kind}"
            return classes if status == "ok" else f"{classes} status-{status}"
        if self.kind == "turn":
            return "turn failed" if self.payload.get("status") == "failed" else "turn"
        if self.kind == "event" and self.event is not None:
            return "event kind-" + self.event.kind.replace(".", "-")
        return self.kind

    @property
    def payload(self) -> dict[str, Any]:
        return dict(self.event.payload) if self.event is not None else {}


def build(messages: Sequence[StoredMessage], events: Sequence[Event]) -> list[Item]:
    """The merged timeline, oldest first."""
    offloads = {
        str(e.payload.get("call_id")): e.id
        for e in events
        if e.kind == EVENT_OFFLOADED and e.payload.get("call_id")
    }
    items: list[Item] = []
    calls: dict[str, Item] = {}
    for stored in messages:
        message = stored.message
        if message.kind == "tool_result" and message.call_id in calls:
            owner = calls[message.call_id]
            owner.results.append(Result(stored, offloads.get(message.call_id)))
            continue
        item = Item("message", stored.created_at, message=stored)
        if message.kind == "tool_result" and message.call_id:
            item.offload_id = offloads.get(message.call_id)
        for call in message.tool_calls:
            calls[call.id] = item
        items.append(item)
    items.extend(_event_items(events))
    items.sort(key=lambda item: (item.created_at, 0 if item.kind == "message" else 1))
    _close_compactions(items)
    return items


def _event_items(events: Sequence[Event]) -> list[Item]:
    out: list[Item] = []
    dropped: list[Event] = []
    for event in events:
        if event.kind == EVENT_DROPPED:
            dropped.append(event)
        elif event.kind == EVENT_COMPACTED:
            out.append(Item("compaction", event.created_at, event=event, dropped=dropped))
            dropped = []
        elif event.kind == TURN_EVENT:
            out.append(Item("turn", event.created_at, event=event))
        elif event.kind != EVENT_OFFLOADED:
            title = EVENT_TITLES.get(event.kind, event.kind)
            out.append(Item("event", event.created_at, event=event, title=title))
    if dropped:  # dropped without a compaction record (an older memlane): shown as such
        out.append(Item("compaction", dropped[-1].created_at, dropped=dropped))
    return out


def _close_compactions(items: list[Item]) -> None:
    """A compaction's tokens after: what the same request forwarded (its turn record)."""
    open_: Item | None = None
    for item in items:
        if item.kind == "compaction":
            open_ = item
        elif item.kind == "turn" and open_ is not None:
            forwarded = item.payload.get("tokens_out")
            if isinstance(forwarded, int):
                open_.tokens_after = forwarded
            open_ = None


def recalled_refs(items: Sequence[Item], *, limit: int = 300) -> list[str]:
    """The memory ids the turns on the page recalled (for their texts), at most `limit`."""
    refs: list[str] = []
    for item in items:
        if item.kind == "turn":
            for hit in item.payload.get("recalled") or []:
                ref = str(hit.get("ref", ""))
                if ref and ref not in refs and hit.get("kind", "fact") == "fact":
                    refs.append(ref)
    return refs[:limit]
