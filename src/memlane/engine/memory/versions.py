"""Versions of a fact over time: closing one when a later fact replaces it, and the chain.

A fact that stops being true is not rewritten: it is closed (`valid_to`, and
`replaced_by` naming its successor) and the new version starts at the same
moment (`valid_from`, and `supersedes` naming the old one). Both stay: recall
shows what is true now, an as-of search what was true then, and `chain` walks
the links to tell the whole story (`memlane memory history`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from memlane.store import FactStore, MessageLog
from memlane.types import Fact, StoredMessage

MAX_CHAIN = 1_000
"""Versions `chain` follows at most (a hand-edited loop of links stops there)."""


def close(old: Fact, new: Fact, at: datetime, *, updated_at: datetime) -> tuple[Fact, Fact]:
    """`old` closed at `at` and replaced by `new`, which starts then: linked both ways.

    A moment before `old` began (an older message reconciled late) closes it the
    instant it began instead, so no interval ever runs backwards.
    """
    end = max(at, old.since)
    closed = replace(old, valid_to=end, replaced_by=new.id, updated_at=updated_at)
    return closed, replace(new, valid_from=end, supersedes=old.id)


@dataclass(frozen=True, slots=True)
class Version:
    """One version in a fact's history, with the message it was learned from (when kept)."""

    fact: Fact
    cause: StoredMessage | None = None

    @property
    def current(self) -> bool:
        return self.fact.valid_to is None and not self.fact.deleted

    @property
    def state(self) -> Literal["current", "replaced", "deleted"]:
        """What became of it: still true, closed by a later version, or deleted."""
        if self.fact.deleted:
            return "deleted"
        return "current" if self.current else "replaced"


def chain(store: FactStore, fact_id: str) -> list[Fact]:
    """Every version linked to `fact_id`, oldest first (the fact alone when it has none)."""
    start = store.get_fact(fact_id)
    if start is None:
        return []
    seen = {start.id}
    before = _follow(store, start, lambda f: f.supersedes, seen)
    after = _follow(store, start, lambda f: f.replaced_by, seen)
    return [*reversed(before), start, *after]


def _follow(
    store: FactStore, start: Fact, link: Callable[[Fact], str | None], seen: set[str]
) -> list[Fact]:
    """The facts reached from `start` along `link`, nearest first; stops at a loop."""
    out: list[Fact] = []
    cursor: Fact | None = start
    while cursor is not None and (target := link(cursor)) and len(seen) < MAX_CHAIN:
        cursor = store.get_fact(target)
        if cursor is None or cursor.id in seen:
            break
        seen.add(cursor.id)
        out.append(cursor)
    return out


def causes(log: MessageLog, facts: Sequence[Fact]) -> list[Version]:
    """Each version with the stored message it came from, when that message is still kept."""
    wanted: dict[str, set[int]] = {}
    for fact in facts:
        if fact.source_session and fact.source_message is not None:
            wanted.setdefault(fact.source_session, set()).add(fact.source_message)
    found: dict[int, StoredMessage] = {}
    for session_id, ids in wanted.items():
        for stored in log.list_messages(session_id, include_superseded=True):
            if stored.id in ids:
                found[stored.id] = stored
    return [
        Version(f, found.get(f.source_message) if f.source_message is not None else None)
        for f in facts
    ]


def interval(fact: Fact) -> str:
    """`2026-01-15 → 2026-03-10` or `since 2026-03-10`: how recall and the CLI label it."""
    start = day(fact.since)
    if fact.valid_to is None:
        return f"since {start}"
    return f"{start} → {day(fact.valid_to)}"


def day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()
