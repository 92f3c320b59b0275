"""One governed request, start to end: plan, compaction, loops, recall, pre-flight.

The ledger's quick reads (the plan, one keyword search) run inline: a thread
hop costs more than they do on a busy machine. Writes (a changed plan, a loop
event: new sessions and rare turns) and the heavy work of a compaction run in a
thread, since a write may wait for another writer's lock and must not stall
the event loop meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from memlane.engine import threads
from memlane.engine.governance import loops, recall
from memlane.engine.governance.cache import Governor, Stats
from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.governance.ledger import EVENT_COMPACTED, EVENT_LOOP
from memlane.engine.governance.plan import Plan
from memlane.engine.governance.report import context_event
from memlane.engine.governance.structure import leading_instructions
from memlane.types import Message

LongTermRecall = Callable[[str, int, int], Awaitable[list[recall.Snippet]]]
"""(query, limit, chars per snippet) → long-term memory snippets, best first."""


@dataclass(frozen=True)
class Governed:
    messages: list[Message]
    plan: Plan
    stats: Stats
    counted: bool = True
    """Whether the stats' token counts are in. False (asked for with `count_later`): the
    request fits by its size alone, and the caller counts `messages` off the request's
    path (`Governor.total`)."""

    @property
    def trimmed(self) -> bool:
        return self.plan.trims


async def govern(
    gov: Governor,
    messages: Sequence[Message],
    *,
    user_text: str = "",
    longterm: LongTermRecall | None = None,
    force: bool = False,
    save: Callable[[Plan], None] | None = None,
    count_later: bool = False,
) -> Governed:
    """The message list to forward. Raises `ContextOverflow` when it cannot fit.

    A changed plan is handed to `save` when given (the proxy queues it behind the turn's
    messages, off the request's path), else saved here, before the messages are returned.
    With `count_later`, a request that fits by its size alone is not counted here
    (`Governed.counted`): encoding a new session's texts took 1 ms for 20 short messages
    and ~6 ms per 100 kB, in front of the request, for figures only the answer reports."""
    settings = gov.settings
    stats = Stats()
    conversation = [m for m in messages if m.origin == "client"]
    stored = gov.ledger.load_plan()
    plan = stored if stored.matches(conversation) else Plan()
    out = gov.render(plan, messages)
    counted = force or not count_later or plan.trims or not gov.fits(out)
    tokens = stats.tokens_in = gov.total(out) if counted else 0
    threshold = gov.budget.threshold
    if counted and (force or (threshold and tokens > threshold)):
        candidate = await gov.compact(plan, messages, stats, force=force)
        candidate_out = gov.render(candidate, messages)
        candidate_tokens = gov.total(candidate_out)
        if candidate_tokens > gov.budget.limit and candidate.head > leading_instructions(
            conversation
        ):  # the head, kept for the session's life, leaves no room beside the instructions
            headless = await gov.compact(plan, messages, stats, headless=True)
            headless_out = gov.render(headless, messages)
            if (headless_tokens := gov.total(headless_out)) < candidate_tokens:
                candidate, candidate_out, candidate_tokens = headless, headless_out, headless_tokens
        if candidate_tokens < tokens:
            plan, out, tokens = candidate, candidate_out, candidate_tokens
            stats.compacted = True
            payload = context_event(stats, plan, gov.budget, before=stats.tokens_in, after=tokens)
            await threads.to_thread(gov.ledger.record_event, EVENT_COMPACTED, payload, "")
    plan = replace(plan, model=gov.model or plan.model)
    loop = loops.detect(conversation, settings.governance_loop_threshold)
    if loop is not None and loop.key not in plan.loops_noted:
        payload = {"tool": loop.name, "count": loop.count}
        await threads.to_thread(gov.ledger.record_event, EVENT_LOOP, payload, "")
        plan = replace(plan, loops_noted=(*plan.loops_noted[-9:], loop.key))
    if plan != stored:
        if save is None:
            await threads.to_thread(gov.ledger.save_plan, plan)
        else:
            save(plan)
    note = loops.note(loop) if loop is not None else None
    if note is not None and not counted:  # rare: it may take the request over the limit
        tokens, counted = gov.total(out), True
        stats.tokens_in = tokens
    if plan.trims:
        snippets = await recall_snippets(gov, user_text, longterm, version=plan.version)
        room = gov.budget.limit - tokens - (gov.count(note) if note is not None else 0)
        found = recall.fitting_message(snippets, room, gov.count)
        if found is not None:
            out = recall.before_question(out, found)
            tokens += gov.count(found)
    if note is not None and loop is not None:  # the note goes out even over the limit
        out.append(note)
        tokens += gov.count(note)
        stats.notes.append(f"loop: {loop.name} x{loop.count}")
    stats.tokens_out = tokens
    if not counted:  # under the threshold, so under the limit: nothing to refuse
        return Governed(out, plan, stats, counted=False)
    if settings.governance_preflight and tokens > gov.budget.limit and gov.budget.window.known:
        raise ContextOverflow(
            model=gov.model,
            tokens=tokens,
            limit=gov.budget.limit,
            window=gov.budget.window.tokens,
        )
    return Governed(out, plan, stats)


async def recall_snippets(
    gov: Governor, query: str, longterm: LongTermRecall | None, *, version: str = ""
) -> list[recall.Snippet]:
    """Snippets of dropped history (and long-term memory, when given) for `query`, best first,
    within the snippet count and character budget."""
    settings = gov.settings
    limit = settings.governance_recall_snippets
    chars = settings.governance_recall_chars
    if limit <= 0 or chars <= 0 or not query.strip():
        return []
    per_snippet = max(200, chars // limit)
    found = gov.ledger.recalled(query, limit, per_snippet, version=version)
    if found is None:  # a store read: a PostgreSQL round trip (or a wait for a server gone)
        found = await threads.to_thread(
            gov.ledger.recall, query, limit, per_snippet, version=version
        )
    found = _by_rank(found)
    if longterm is not None:
        found += _by_rank(await longterm(query, limit, per_snippet))
    return recall.select(found, limit, chars)


def _by_rank(snippets: list[recall.Snippet]) -> list[recall.Snippet]:
    """Scores of different searches do not compare; ranks do (the two lists interleave)."""
    return [replace(s, score=1.0 / (rank + 1)) for rank, s in enumerate(snippets)]
