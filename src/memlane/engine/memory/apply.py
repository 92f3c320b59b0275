"""A reconciliation's plan applied to the book: what it compares with, where each fact
came from, and what the update changed.

`reconcile` asks the LLM what to do with new facts against their neighbourhood; this
module finds that neighbourhood (`neighbourhood`) and writes the answer (`apply_plan`):
adds, updates that close the old fact and link it with its replacement, deletes. Both the
write path after a turn (`ingest`) and a fact added deliberately (`manage.add_memory`,
the `memory_add` tool) go through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from memlane.engine import threads
from memlane.engine.memory import cites, versions
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.dates import absolute_dates
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.reconcile import Plan, citing_first
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.files.memory_files import new_id, now_utc
from memlane.store.analysis import terms
from memlane.types import Fact


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where facts written by a reconciliation came from, kept on every fact it writes."""

    conversation_id: str
    """The conversation (session id) the facts came from, or the face that added them
    deliberately (`mcp`)."""
    source_session: str | None = None
    source_message: int | None = None
    said_at: datetime | None = None
    """When it was said: the facts are true from then (None: now)."""
    source_turns: tuple[str, ...] = ()
    """The remembered turns (entry ids) the facts came from: recall brings them along."""
    namespace: str | None = None
    """The namespace the facts were said in: their project folder when it is one here
    (`cites.project_of`), for a fact kept in its conversation."""


@dataclass
class IngestReport:
    """What one update of memory changed: a turn's (or a batch's) write path, or a fact
    added deliberately (`memory add`)."""

    turns: int = 0
    facts_added: list[str] = field(default_factory=list)
    facts_updated: int = 0
    facts_closed: list[str] = field(default_factory=list)
    """Each replaced fact with its interval: `The user lives in Berlin (2026-01-15 → …)`."""
    facts_deleted: int = 0
    summary: bool = False
    evicted: int = 0
    reason: str = ""
    """How the facts were decided (`reconcile.Plan.reason`), or why none was: extraction
    off, no user text, the LLM refused or failed, no fact found (`ingest_turns` says one)."""

    @property
    def changed(self) -> bool:
        return bool(
            self.turns
            or self.facts_added
            or self.facts_updated
            or self.facts_deleted
            or self.summary
            or self.evicted
        )

    def message(self, conversation: str) -> str:
        """The git commit message: what this update changed."""
        parts = []
        if self.facts_added:
            parts.append(f"+{len(self.facts_added)} fact(s)")
        if self.facts_updated:
            parts.append(f"{self.facts_updated} updated")
        if self.facts_deleted:
            parts.append(f"{self.facts_deleted} deleted")
        if self.turns:
            parts.append(f"{self.turns} turn(s)")
        if self.summary:
            parts.append("summary updated")
        if self.evicted:
            parts.append(f"{self.evicted} evicted")
        head = f"memory: {', '.join(parts) or 'no change'} in conversation {conversation}"
        lines = [f"+ {text}" for text in self.facts_added]
        lines += [f"- {text}" for text in self.facts_closed]
        body = "\n".join(lines)
        return f"{head}\n\n{body}" if body else head


NEIGHBOURS_PER_FACT = 5
MAX_NEIGHBOURS = 15
"""Existing facts a reconciliation compares with, for up to three new facts..."""
MAX_BATCH_NEIGHBOURS = 40
"""...and for a batch's (five per fact, up to this)."""


async def neighbourhood(rt: Runtime, facts: Sequence[str], scope: str) -> list[Fact]:
    """Existing facts of `scope` close to any new fact, and those about a file one names
    (`reconcile.citing_first`: first): what reconciliation compares with."""
    found: dict[str, None] = {}
    named = [path for text in facts for path in cites.mentioned(text)]
    files = [name for path in named for name in (path, path.rsplit("/", 1)[-1])]
    for text in [*facts, *dict.fromkeys(files)]:
        hits = await search(rt, text, scopes=(scope,), roles=("memory",), top_k=NEIGHBOURS_PER_FACT)
        for hit in hits:
            found.setdefault(hit.ref)
    most = min(MAX_BATCH_NEIGHBOURS, max(MAX_NEIGHBOURS, NEIGHBOURS_PER_FACT * len(facts)))
    ids = list(found)
    loaded = await threads.to_thread(rt.store.list_facts, ids=ids) if ids else []
    by_id = {f.id: f for f in loaded}  # one read, the search's order kept
    live = [by_id[i] for i in ids if i in by_id and by_id[i].valid_to is None]
    return citing_first(facts, live)[:most]


async def apply_plan(
    book: MemoryBook,
    plan: Plan,
    existing: Sequence[Fact],
    *,
    scope: str,
    source: Provenance,
    report: IngestReport,
    sources: Mapping[str, Provenance] | None = None,
) -> list[Fact]:
    """Write a reconciliation plan: adds, updates (the old fact closed at the message's
    time and linked both ways with its replacement), deletes (soft, ended then too);
    what it changed is added to `report`.

    `sources` maps each new fact of a batch to the message it came from; a text the
    reconciliation rewrote takes the source of the new fact it shares most words with,
    else `source` (the batch's latest). Returns the facts written (new ones and the
    replacements of updated ones)."""
    by_id = {f.id: f for f in existing}
    stamp = now_utc()

    def origin(text: str) -> Provenance:
        return source_of(text, sources, source)

    def fresh(text: str) -> Fact:
        where = origin(text)
        said = where.said_at or stamp
        fact = new_fact(
            scope=scope,
            conversation_id=where.conversation_id,
            role="memory",
            text=absolute_dates(text, said),  # what the reconciliation wrote, too
            fact_id=new_id(),
            source_session=where.source_session,
            source_message=where.source_message,
            created_at=stamp,
        )
        return replace(fact, valid_from=said, source_turns=where.source_turns)

    fresh_facts = [fresh(text) for text in [*plan.adds, *(text for _, text in plan.updates)]]
    fresh_facts = await _noted(book, fresh_facts, scope, source)
    puts = fresh_facts[: len(plan.adds)]
    added = list(puts)
    for (old_id, _), replacement in zip(plan.updates, fresh_facts[len(plan.adds) :], strict=True):
        said = replacement.valid_from or stamp
        closed, replacement = versions.close(by_id[old_id], replacement, said, updated_at=stamp)
        puts += [closed, replacement]
        added.append(replacement)
        report.facts_closed.append(f"{closed.text} ({versions.interval(closed)}, replaced)")
    said = source.said_at or stamp  # a fact deleted alone: ended by the batch's latest message
    tombstones = [
        (replace(by_id[old_id], valid_to=max(said, by_id[old_id].since)), None)
        for old_id in plan.deletes
        if old_id in by_id
    ]
    await book.write(puts=puts, tombstones=tombstones, new={f.id for f in added})
    # a batch's facts may go to two scopes (the user's, the project's): one report for both
    report.facts_added += [f.text for f in added]
    report.facts_updated += len(plan.updates)
    report.facts_deleted += len(tombstones)
    report.reason = "; ".join(dict.fromkeys(r for r in (report.reason, plan.reason) if r))
    return added


async def _noted(book: MemoryBook, facts: list[Fact], scope: str, source: Provenance) -> list[Fact]:
    """The new facts with the project files they cite recorded (`engine.memory.cites`),
    when that is on (`memory_cites`) and their project folder is on this machine."""
    if not facts or not book.rt.settings.memory_cites:
        return facts
    return await threads.to_thread(
        lambda: cites.note_all(facts, cites.project_of(scope, source.namespace))
    )


def source_of(
    text: str, sources: Mapping[str, Provenance] | None, default: Provenance
) -> Provenance:
    """Where a fact a reconciliation wrote came from: its own new fact's message, else the
    new fact sharing the most words with it (a tie, or none shared: `default`)."""
    if not sources:
        return default
    if text in sources:
        return sources[text]
    words = set(terms(text))
    scored = sorted(((len(words & set(terms(t))), t) for t in sources), reverse=True)
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return default
    return sources[scored[0][1]]
