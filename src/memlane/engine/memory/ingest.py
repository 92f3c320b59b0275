"""The write path: after a turn's response, remember it and learn from it.

Runs in the background, never in front of a response, a batch of a session's turns
at a time (`schedule_ingest`: the turns wait until the session is quiet for
`memory_batch_quiet_seconds`, or `memory_batch_turns` of them wait; shutdown and
`Background.drain` take what waits). For a batch:

1. the user's and the assistant's turns become entries of the conversation
   (`turns/user`, `turns/assistant`), with their provenance, in one write;
2. facts are extracted from the *new* user messages only (never assistant text
   or tool output), in one call for the batch (`extract.extract_batch`), each
   fact kept with the message it came from, and reconciled together against
   their neighbourhood in the fact scope;
3. the conversation's rolling summary takes in the new facts (one call);
4. the conversation is evicted down to `memory_max_entries`;
5. one git commit records the update, its message saying what changed.

Each step logs and carries on when the LLM or the embedder fails; the turns are
written first, so a failure later never loses what was said. A turn waiting in a
batch lives in memory only (the session's messages are stored before the response,
so a crash loses no message, but the turns of the batch waiting or in flight are
not remembered as memory).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from memlane.engine import threads
from memlane.engine.background import session_policy
from memlane.engine.failopen import record_for
from memlane.engine.memory import scopes, versions
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.dates import absolute_dates
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.evict import choose_evictions
from memlane.engine.memory.extract import Said, extract_batch
from memlane.engine.memory.reconcile import Plan, reconcile
from memlane.engine.memory.summary import SUMMARY_KIND, summary_id, update_summary
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer, Turn
from memlane.files.memory_files import new_id, now_utc
from memlane.store.analysis import terms
from memlane.text.llm import LLMError
from memlane.types import Fact, FactRole

log = logging.getLogger("memlane.memory")

REFUSED_HINT = (
    "the LLM refused memlane's own fact-extraction call ({}): set MEMLANE_LLM_API_KEY "
    "(or MEMLANE_UPSTREAM_API_KEY), or let the client send its key, which memlane borrows "
    "for the work its request caused"
)
NEIGHBOURS_PER_FACT = 5
MAX_NEIGHBOURS = 15
"""Existing facts a reconciliation compares with, for up to three new facts..."""
MAX_BATCH_NEIGHBOURS = 40
"""...and for a batch's (five per fact, up to this)."""


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What the write path needs from one finished turn (copied: the turn object moves on)."""

    session_id: str
    namespace: str
    model: str | None
    tenant: str = ""
    user_text: str = ""
    user_message_id: int | None = None
    assistant_text: str = ""
    said_at: datetime | None = None
    """When the user's message was written (stored); None: now. Facts are valid from it."""


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

    @staticmethod
    def of_turn(item: TurnInput, turns: tuple[str, ...] = ()) -> Provenance:
        return Provenance(
            item.session_id, item.session_id, item.user_message_id, item.said_at, turns
        )


@dataclass
class IngestReport:
    turns: int = 0
    facts_added: list[str] = field(default_factory=list)
    facts_updated: int = 0
    facts_closed: list[str] = field(default_factory=list)
    """Each replaced fact with its interval: `The user lives in Berlin (2026-01-15 → …)`."""
    facts_deleted: int = 0
    summary: bool = False
    evicted: int = 0
    reason: str = ""

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


def schedule_ingest(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """Add a finished turn to its session's batch (`Background.batch`); returns at once."""
    item = turn_input(rt, turn, answer)
    if item is None:
        return
    if item.said_at is None:  # when it was said, not when its batch runs
        item = replace(item, said_at=now_utc())
    name = f"memory-ingest:{item.session_id}"
    run = functools.partial(_recorded, rt)
    rt.background.batch(name, item, run, session_policy(rt.settings), name=name)


async def _recorded(rt: Runtime, items: list[TurnInput]) -> None:
    """The write path for a batch, with its outcome kept for `memlane status`: one
    `ingest_turns` per run of turns sharing a namespace, tenant and model."""
    groups: list[list[TurnInput]] = []
    for item in items:
        if groups and _same_group(groups[-1][-1], item):
            groups[-1].append(item)
        else:
            groups.append([item])
    for group in groups:
        session_id = group[0].session_id
        try:
            report = await ingest_turns(rt, group)
        except Exception as exc:
            rt.activity.extraction(ok=False, detail=repr(exc)[:300], session_id=session_id)
            raise
        detail = report.message(session_id).splitlines()[0].removeprefix("memory: ")
        if report.reason:
            detail += f" ({report.reason})"
        rt.activity.extraction(ok=True, detail=detail, session_id=session_id)


def _same_group(a: TurnInput, b: TurnInput) -> bool:
    return (a.session_id, a.namespace, a.tenant, a.model) == (
        b.session_id,
        b.namespace,
        b.tenant,
        b.model,
    )


def turn_input(rt: Runtime, turn: Turn, answer: Answer) -> TurnInput | None:
    """The parts of a turn worth remembering; None when there is nothing to do."""
    settings = rt.settings
    if not settings.memory_enabled or turn.session is None or turn.ephemeral or answer.failed:
        return None
    if not (settings.memory_store_turns or settings.memory_extract_facts):
        return None  # no kind of memory is written: nothing to run at all
    user_text, user_id, said_at = _new_user_message(turn)
    if not settings.memory_store_turns and not user_text.strip():
        return None  # facts come from a new user message only: nothing to extract from
    assistant = "\n\n".join(
        m.text
        for m in answer.messages
        if m.role == "assistant" and m.kind == "message" and m.text.strip()
    )
    if not user_text and not assistant:
        return None
    return TurnInput(
        session_id=turn.session.id,
        namespace=turn.namespace,
        model=rt.memory_model(turn.model),
        tenant=turn.session.tenant,
        user_text=user_text,
        user_message_id=user_id,
        assistant_text=assistant,
        said_at=said_at,
    )


def _new_user_message(turn: Turn) -> tuple[str, int | None, datetime | None]:
    """The latest user message if this request added it (a resent history adds nothing),
    with its id and when it was stored."""
    if turn.synced is None:
        return turn.user_text, None, None
    for stored in reversed(turn.synced.added):
        message = stored.message
        if message.role == "user" and message.kind == "message" and message.origin == "client":
            return message.text, stored.id, stored.created_at
    return "", None, None


async def ingest_turn(rt: Runtime, item: TurnInput) -> IngestReport:
    """Run the whole write path for one turn (`ingest_turns` of one)."""
    return await ingest_turns(rt, [item])


async def ingest_turns(rt: Runtime, items: Sequence[TurnInput]) -> IngestReport:
    """Run the write path for a batch of turns of one session (oldest first, one
    namespace, tenant and model): what a background job does."""
    if not items:
        return IngestReport()
    settings = rt.settings
    book = rt.memory_book
    await book.ready()
    report = IngestReport()
    items = [item if item.said_at else replace(item, said_at=now_utc()) for item in items]
    first = items[0]
    conversation = scopes.conversation_scope(first.session_id, first.tenant)
    said_in: list[tuple[str, ...]] = [() for _ in items]
    if settings.memory_store_turns:
        entries = [_turn_entries(item, conversation) for item in items]
        written = [entry for per_turn in entries for entry in per_turn]
        await book.write(puts=written, new={entry.id for entry in written})
        report.turns = len(written)
        # facts come from the user's message only: its turn is where they were said
        said_in = [tuple(t.id for t in per_turn if t.role == "user") for per_turn in entries]
    found: list[tuple[int, str]] = []
    said = [Said(item.user_text, _said(item)) for item in items]
    if settings.memory_extract_facts and any(m.text.strip() for m in said):
        try:
            found = await extract_batch(rt.llm, said, model=first.model)
        except LLMError as exc:  # refused: every later turn would be too, so say it once here
            await record_for(
                rt, first.session_id, "extraction", REFUSED_HINT.format(exc), "refused"
            )
    if found:
        scope = scopes.fact_scope(settings, first.session_id, first.namespace, first.tenant)
        facts = list(dict.fromkeys(fact for _, fact in found))
        sources: dict[str, Provenance] = {}
        for index, fact in found:
            sources.setdefault(fact, Provenance.of_turn(items[index], said_in[index]))
        async with book.scope_lock(scope):
            existing = await neighbourhood(rt, facts, scope)
            plan = await reconcile(rt.llm, facts, existing, model=first.model)
            latest = Provenance.of_turn(items[found[-1][0]], said_in[found[-1][0]])
            await apply_plan(
                book, plan, existing, scope=scope, source=latest, report=report, sources=sources
            )
    if settings.memory_summarization and report.facts_added:
        report.summary = await _update_summary(rt, book, first, conversation, report.facts_added)
    added = report.turns + len(report.facts_added)
    report.evicted = await evict_conversation(rt, book, first.session_id, added=added)
    if report.changed:
        book.commit_later(report.message(first.session_id))
    return report


def _said(item: TurnInput) -> datetime:
    return item.said_at or now_utc()


def _turn_entries(item: TurnInput, scope: str) -> list[Fact]:
    """The exchange as turn entries, dated when the user's message was written (the
    answer a microsecond on, so their order is kept)."""
    said = _said(item)
    turns: list[tuple[FactRole, str, int | None, datetime]] = [
        ("user", item.user_text, item.user_message_id, said),
        ("assistant", item.assistant_text, None, said + timedelta(microseconds=1)),
    ]
    return [
        new_fact(
            scope=scope,
            conversation_id=item.session_id,
            role=role,
            text=text,
            fact_id=new_id(),
            source_session=item.session_id,
            source_message=message_id,
            created_at=when,
        )
        for role, text, message_id, when in turns
        if text.strip()
    ]


async def neighbourhood(rt: Runtime, facts: Sequence[str], scope: str) -> list[Fact]:
    """Existing facts of `scope` close to any new fact: what reconciliation compares with."""
    found: dict[str, None] = {}
    for text in facts:
        hits = await search(rt, text, scopes=(scope,), roles=("memory",), top_k=NEIGHBOURS_PER_FACT)
        for hit in hits:
            found.setdefault(hit.ref)
    most = min(MAX_BATCH_NEIGHBOURS, max(MAX_NEIGHBOURS, NEIGHBOURS_PER_FACT * len(facts)))
    ids = list(found)[:most]
    loaded = await threads.to_thread(lambda: [rt.store.get_fact(i) for i in ids])
    return [f for f in loaded if f is not None and not f.deleted and f.valid_to is None]


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
    time and linked both ways with its replacement), deletes (soft, ended then too).

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

    puts = [fresh(text) for text in plan.adds]
    added = list(puts)
    for old_id, text in plan.updates:
        replacement = fresh(text)
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
    report.facts_added = [f.text for f in added]
    report.facts_updated = len(plan.updates)
    report.facts_deleted = len(tombstones)
    report.reason = plan.reason
    return added


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


async def _update_summary(
    rt: Runtime, book: MemoryBook, item: TurnInput, scope: str, facts: Sequence[str]
) -> bool:
    sid = summary_id(item.session_id)
    previous = await threads.to_thread(rt.store.get_fact, sid)
    old_text = previous.text if previous is not None and not previous.deleted else ""
    text = await update_summary(rt.llm, old_text, facts, model=item.model)
    if not text.strip() or text == old_text:
        return False
    now = now_utc()
    summary = new_fact(
        scope=scope,
        conversation_id=item.session_id,
        role="summary",
        text=text,
        fact_id=sid,
        source_session=item.session_id,
        summary_kind=SUMMARY_KIND,
        created_at=previous.created_at if previous is not None else now,
    )
    summary = replace(summary, updated_at=now)
    await book.write(puts=[summary])
    return True


async def evict_conversation(
    rt: Runtime, book: MemoryBook, conversation_id: str, *, added: int = 0
) -> int:
    """Soft-delete the oldest facts and turns over `memory_max_entries`.

    Listing a long conversation after every turn costs milliseconds of the process's
    time, so the book remembers how many entries a conversation held at its last
    listing plus what was `added` since: while that stays within the limit, nothing
    is listed. (Another process's writes are counted at this one's next listing.)
    """
    limit = rt.settings.memory_max_entries
    known = book.entry_counts.get(conversation_id)
    if known is not None and known + added <= limit:
        book.entry_counts[conversation_id] = known + added
        return 0
    entries = await threads.to_thread(
        rt.store.list_facts,
        conversation_id=conversation_id,
        roles=("memory", "user", "assistant"),
    )
    evicted = choose_evictions(entries, limit)
    await book.write(tombstones=[(fact, None) for fact in evicted])
    book.entry_counts[conversation_id] = sum(
        not e.deleted and e.role != "summary" for e in entries
    ) - len(evicted)
    return len(evicted)
