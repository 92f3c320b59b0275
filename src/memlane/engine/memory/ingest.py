"""The write path: after a turn's response, remember it and learn from it.

Runs in the background, never in front of a response, a batch of a session's turns
at a time (`schedule_ingest`: the turns wait until the session is quiet for
`memory_batch_quiet_seconds`, or `memory_batch_turns` of them wait; shutdown and
`Background.drain` take what waits). For a batch:

1. the user's and the assistant's turns become entries of the conversation
   (`turns/user`, `turns/assistant`), with their provenance, in one write;
2. facts are extracted from the *new* user messages only (never assistant text
   or tool output), in one call for the batch (`extract.extract_batch`), each
   fact kept with the message it came from and labelled as about the user or the
   project; each scope's facts (the user's: the tenant's global scope; the
   project's: its namespace, `scopes.fact_scope`) are reconciled together against
   their neighbourhood in that scope only;
3. the conversation's rolling summary takes in the new facts (one call);
4. the conversation is evicted down to `memory_max_entries`;
5. one git commit records the update, its message saying what changed.

Each step logs and carries on when the LLM or the embedder fails; the turns are
written first, so a failure later never loses what was said. A turn waiting in a
batch lives in memory, but its work is durable: the session's messages are stored
before the response, and the session's mark (`engine.memory.marks`) moves past a
turn only once its batch is done, so the work of every turn a stop or a crash left
undone is queued again at the next start (`engine.memory.resume`). A job that fails
leaves the mark where it was too, and its session's turns are tried again after a pause
(`engine.memory.failures`).
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memlane.engine import threads
from memlane.engine.background import Background, session_policy
from memlane.engine.failopen import record_for
from memlane.engine.memory import cites, marks, scopes
from memlane.engine.memory.apply import IngestReport, Provenance, apply_plan, neighbourhood
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.evict import choose_evictions
from memlane.engine.memory.extract import Extracted, Said, extract_batch
from memlane.engine.memory.failures import failures
from memlane.engine.memory.reconcile import reconcile
from memlane.engine.memory.rederive import answered_positions, session_turns
from memlane.engine.memory.summary import SUMMARY_KIND, summary_id, update_summary
from memlane.engine.memory.turn_input import (
    ANSWER_AFTER,
    TRUNCATED_MARKER,
    Reread,
    TurnInput,
    bounded,
    held_bytes,
    within_ceiling,
)
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer, Turn
from memlane.files.memory_files import new_id, now_utc
from memlane.text.llm import REQUEST_ROUTE, LLMError, LLMRoute
from memlane.text.llm_route import following
from memlane.types import Fact, FactRole

__all__ = [
    "ANSWER_AFTER",
    "TRUNCATED_MARKER",
    "TurnInput",
    "bounded",
    "ingest_turn",
    "ingest_turns",
    "queue",
    "schedule_ingest",
    "turn_input",
    "within_ceiling",
]

log = logging.getLogger("memlane.memory")

REFUSED_HINT = (
    "the LLM refused memlane's own fact-extraction call ({}): set MEMLANE_LLM_API_KEY "
    "(or MEMLANE_UPSTREAM_API_KEY), or let the client send its key, which memlane borrows "
    "for the work its request caused"
)

NOT_EXTRACTING = "fact extraction is off (memory_extract_facts = false)"
NOTHING_SAID = "no user message to learn facts from (facts come from the user's words only)"
NO_FACTS = "the model found no durable fact in the user's message"
"""`IngestReport.reason` when no fact was reconciled: every write path says why."""

EVENT_TRUNCATED = "memory.truncated"


def schedule_ingest(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """Add a finished turn to its session's batch (`Background.batch`); returns at once."""
    item = turn_input(rt, turn, answer)
    if item is None:
        return
    if item.said_at is None:  # when it was said, not when its batch runs
        item = replace(item, said_at=now_utc())
    queue(rt, item)


def queue(rt: Runtime, item: TurnInput | Reread) -> None:
    """Add `item` to its session's batch (a finished turn, or one resumed at start-up).
    Past the queue's bounds (items, and the bytes of their texts) the session is kept as
    a `Reread` only: no turn's text waits in memory then, and its job finds the turns in
    the store."""
    name = f"memory-ingest:{item.session_id}"
    run = functools.partial(_recorded, rt)
    stand_in = Reread(item.session_id, item.route)
    rt.background.batch(
        name,
        item,
        run,
        session_policy(rt.settings),
        name=name,
        stand_in=stand_in,
        size=held_bytes(item),
    )


async def _recorded(rt: Runtime, items: list[TurnInput | Reread]) -> None:
    """The write path for a batch, with its outcome kept for `memlane status`: one
    `ingest_turns` per run of turns sharing a namespace, tenant, model and route."""
    groups: list[list[TurnInput]] = []
    for item in await _still_to_do(rt, items):
        if groups and _same_group(groups[-1][-1], item):
            groups[-1].append(item)
        else:
            groups.append([item])
    for group in groups:
        session_id = group[0].session_id
        positions = [item.user_position for item in group if item.user_position is not None]
        try:
            with following(group[0].route):  # the live request's, else the one it went by
                report = await ingest_turns(rt, group)
            if positions:  # these turns are remembered: not resumed after a restart
                await threads.to_thread(_remembered, rt, session_id, positions)
        except Exception as exc:
            rt.activity.extraction(ok=False, detail=repr(exc)[:300], session_id=session_id)
            _again_later(rt, session_id, group[0].route)
            raise
        failures(rt.background).note_success(session_id)
        detail = report.message(session_id).splitlines()[0].removeprefix("memory: ")
        if report.reason:
            detail += f" ({report.reason})"
        rt.activity.extraction(ok=True, detail=detail, session_id=session_id)


def _again_later(rt: Runtime, session_id: str, route: LLMRoute | None) -> None:
    """After a failed job, the session's turns past its mark are read again from the store
    after a pause (`failures`); past the last pause, at the next start."""
    pause = failures(rt.background).note_failure(session_id)
    if pause is None:
        log.warning("memory work of session %s failed again: left to the next start", session_id)
        return
    log.warning("memory work of session %s failed: tried again in %.0f s", session_id, pause)
    rt.background.later(pause, functools.partial(queue, rt, Reread(session_id, route)))


def _remembered(rt: Runtime, session_id: str, positions: list[int]) -> None:
    """Move the session's mark past the turns at `positions`, now remembered. Where
    another process may take some of the session's turns, or a job of the session failed
    here (its turns are still to do), not past a turn not done yet (`marks.record_done`)."""
    if rt.serves_alone and not failures(rt.background).failed_here(session_id):
        marks.advance(rt.store, session_id, max(positions) + 1)  # every turn here, in order
        return
    answered = functools.partial(answered_positions, rt, session_id)
    marks.record_done(rt.store, session_id, positions, answered)


async def _still_to_do(rt: Runtime, items: Sequence[TurnInput | Reread]) -> list[TurnInput]:
    """The batch's turns, with those a `Reread` stands for read from the store, oldest
    first: none twice, and none a job of this process already re-read from the store
    while its own item was on its way.

    Not the session's mark: with `--workers`, another process's job moves it past turns
    this one has yet to remember (each worker takes some of a session's turns), and a
    live turn skipped for it was never remembered."""
    session_id = items[0].session_id
    turns = [item for item in items if isinstance(item, TurnInput)]
    reread = next((item for item in reversed(items) if isinstance(item, Reread)), None)
    done_here = _REREAD_THROUGH.setdefault(rt.background, {})
    through = done_here.get(session_id)
    turns = [turn for turn in turns if not _passed(turn, through)]
    if reread is not None:
        found = await threads.to_thread(_from_store, rt, session_id)
        live = {turn.user_position for turn in turns}
        turns += [replace(t, route=reread.route) for t in found if t.user_position not in live]
        turns.sort(key=lambda turn: -1 if turn.user_position is None else turn.user_position)
    most = session_policy(rt.settings).most
    if reread is not None and len(turns) > most:  # the rest in a job of their own
        turns = turns[:most]
        queue(rt, reread)
    if reread is not None:
        positions = [t.user_position for t in turns if t.user_position is not None]
        if positions:
            done_here[session_id] = max(max(positions) + 1, through or 0)
    return turns


_REREAD_THROUGH: weakref.WeakKeyDictionary[Background, dict[str, int]] = weakref.WeakKeyDictionary()
"""Per runtime (its background queue), per session: the position up to which a job of
this process re-read its turns from the store (a `Reread`): their own items, still on
their way, are skipped."""


def _passed(turn: TurnInput, through: int | None) -> bool:
    position = turn.user_position
    return through is not None and position is not None and position < through


def _from_store(rt: Runtime, session_id: str) -> list[TurnInput]:
    """The session's answered turns not remembered yet, as the store has them now."""
    return session_turns(rt, session_id, rt.store.get_state(session_id))


def _same_group(a: TurnInput, b: TurnInput) -> bool:
    return (a.session_id, a.namespace, a.tenant, a.model, a.route) == (
        b.session_id,
        b.namespace,
        b.tenant,
        b.model,
        b.route,
    )


def turn_input(rt: Runtime, turn: Turn, answer: Answer) -> TurnInput | None:
    """The parts of a turn worth remembering; None when there is nothing to do."""
    settings = rt.settings
    if not settings.memory_enabled or turn.session is None or turn.ephemeral or answer.failed:
        return None
    if not (settings.memory_store_turns or settings.memory_extract_facts):
        return None  # no kind of memory is written: nothing to run at all
    user_text, user_id, said_at, position = _new_user_message(turn)
    if not settings.memory_store_turns and not user_text.strip():
        return None  # facts come from a new user message only: nothing to extract from
    assistant = "\n\n".join(
        m.text
        for m in answer.messages
        if m.role == "assistant" and m.kind == "message" and m.text.strip()
    )
    if not user_text and not assistant:
        return None
    item = TurnInput(
        session_id=turn.session.id,
        namespace=turn.namespace,
        model=rt.memory_model(turn.model),
        tenant=turn.session.tenant,
        route=REQUEST_ROUTE.get(),
        user_text=user_text,
        user_message_id=user_id,
        assistant_text=assistant,
        said_at=said_at,
        user_position=position,
    )
    return within_ceiling(item, settings.memory_message_chars)


def _new_user_message(turn: Turn) -> tuple[str, int | None, datetime | None, int | None]:
    """The latest user message if this request added it (a resent history adds nothing),
    with its id, when it was stored and its position."""
    if turn.synced is None:
        return turn.user_text, None, None, None
    for stored in reversed(turn.synced.added):
        message = stored.message
        if message.role == "user" and message.kind == "message" and message.origin == "client":
            return message.text, stored.id, stored.created_at, stored.position
    return "", None, None, None


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
    await _record_cuts(rt, items)
    conversation = scopes.conversation_scope(first.session_id, first.tenant)
    said_in: list[tuple[str, ...]] = [() for _ in items]
    if settings.memory_store_turns:
        entries = [_entries_left(item, conversation) for item in items]
        if settings.memory_cites:
            entries = await threads.to_thread(_noted_turns, entries, conversation, first.namespace)
        written = [entry for per_turn in entries for entry in per_turn]
        await book.write(puts=written, new={entry.id for entry in written})
        report.turns = len(written)
        # facts come from the user's message only: its turn is where they were said
        said_in = [
            item.entry_ids or tuple(t.id for t in per_turn if t.role == "user")
            for item, per_turn in zip(items, entries, strict=True)
        ]
    found: list[Extracted] = []
    said = [Said(item.user_text, _said(item)) for item in items]
    if not settings.memory_extract_facts:
        report.reason = NOT_EXTRACTING
    elif not any(m.text.strip() for m in said):
        report.reason = NOTHING_SAID
    else:
        try:
            extraction = await extract_batch(rt.llm, said, model=first.model)
            found, report.reason = extraction.facts, extraction.gave_up
        except LLMError as exc:  # refused: every later turn would be too, so say it once here
            report.reason = REFUSED_HINT.format(exc)
            await record_for(rt, first.session_id, "extraction", report.reason, "refused")
        if not found and not report.reason:
            report.reason = NO_FACTS
    for scope, bound in _by_scope(rt, first, found).items():
        sources = [_provenance(items[f.message], said_in[f.message]) for f in bound]
        facts = [f.fact for f in bound]
        await _reconcile_into(rt, scope, facts, sources, report, model=first.model)
    if settings.memory_summarization and report.facts_added:
        report.summary = await _update_summary(rt, book, first, conversation, report.facts_added)
    added = report.turns + len(report.facts_added)
    report.evicted = await evict_conversation(rt, book, first.session_id, added=added)
    if report.changed:
        book.commit_later(report.message(first.session_id))
    return report


def _noted_turns(entries: list[list[Fact]], scope: str, namespace: str) -> list[list[Fact]]:
    """The turn entries with the project files they name recorded (blocking)."""
    root = cites.project_of(scope, namespace)
    return entries if root is None else [cites.note_all(each, root) for each in entries]


def _by_scope(
    rt: Runtime, first: TurnInput, found: Sequence[Extracted]
) -> dict[str, list[Extracted]]:
    """The facts grouped by where they are kept: the user's in the tenant's global scope,
    the project's in its namespace (`scopes.fact_scope`)."""
    out: dict[str, list[Extracted]] = {}
    for fact in found:
        scope = scopes.fact_scope(
            rt.settings, first.session_id, first.namespace, first.tenant, fact.about
        )
        out.setdefault(scope, []).append(fact)
    return out


async def _reconcile_into(
    rt: Runtime,
    scope: str,
    found: Sequence[str],
    sources: Sequence[Provenance],
    report: IngestReport,
    *,
    model: str | None,
) -> None:
    """Reconcile the facts bound for `scope` (each with its source) against that scope's
    facts only: a fact meant for one project, or for the user, never updates or deletes
    a fact of another scope."""
    book = rt.memory_book
    facts = list(dict.fromkeys(found))
    by_text: dict[str, Provenance] = {}
    for fact, source in zip(found, sources, strict=True):
        by_text.setdefault(fact, source)
    async with book.scope_lock(scope):
        existing = await neighbourhood(rt, facts, scope)
        plan = await reconcile(rt.llm, facts, existing, model=model)
        await apply_plan(
            book, plan, existing, scope=scope, source=sources[-1], report=report, sources=by_text
        )


async def _record_cuts(rt: Runtime, items: Sequence[TurnInput]) -> None:
    """One `memory.truncated` event per cut message, in its session's event log."""
    for item in items:
        for role, chars in item.cut:
            payload = {"role": role, "chars": chars, "kept": rt.settings.memory_message_chars}
            text = (
                f"memory kept the first {payload['kept']} of {chars} characters of a {role} message"
            )
            await threads.to_thread(
                rt.store.add_event, item.session_id, EVENT_TRUNCATED, payload, text=text
            )


def _provenance(item: TurnInput, turns: tuple[str, ...] = ()) -> Provenance:
    """Facts from this turn's user message: its session, message, time and turn entries."""
    return Provenance(
        item.session_id, item.session_id, item.user_message_id, item.said_at, turns, item.namespace
    )


def _said(item: TurnInput) -> datetime:
    return item.said_at or now_utc()


def _entries_left(item: TurnInput, scope: str) -> list[Fact]:
    """The turn's entries not written yet: both, or, for a turn resumed after a stop, those
    the stop left unwritten."""
    written = {"user": bool(item.entry_ids), "assistant": bool(item.answer_entry_ids)}
    return [entry for entry in _turn_entries(item, scope) if not written[entry.role]]


def _turn_entries(item: TurnInput, scope: str) -> list[Fact]:
    """The exchange as turn entries, dated when the user's message was written (the
    answer `ANSWER_AFTER` on, so their order is kept)."""
    said = _said(item)
    turns: list[tuple[FactRole, str, int | None, datetime]] = [
        ("user", item.user_text, item.user_message_id, said),
        ("assistant", item.assistant_text, None, said + ANSWER_AFTER),
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
        book.note_entry_count(conversation_id, known + added)
        return 0
    entries = await threads.to_thread(
        rt.store.list_facts,
        conversation_id=conversation_id,
        roles=("memory", "user", "assistant"),
    )
    evicted = choose_evictions(entries, limit)
    await book.write(tombstones=[(fact, None) for fact in evicted])
    kept = sum(not e.deleted and e.role != "summary" for e in entries) - len(evicted)
    book.note_entry_count(conversation_id, kept)
    return len(evicted)
