"""Manual compaction (`memlane sessions compact ID`, `POST /v1/memlane/sessions/{id}/compact`).

Compacts a stored session now, whatever its size, with the primary model (the
model the session last used, else `llm_model`): everything but the newest
step is folded into the snapshot. The next request of the session is
forwarded under the new plan. If the summariser fails, nothing changes and
the caller is told why (unlike automatic compaction, which falls back to a
marker because the request must go out).
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.engine import threads
from memlane.engine.governance.cache import Stats
from memlane.engine.governance.ledger import EVENT_COMPACTED
from memlane.engine.governance.report import context_event
from memlane.engine.governance.setup import make_governor, store_ledger, write_anchor
from memlane.engine.runtime import Runtime
from memlane.store import SessionNotFound
from memlane.types import Message


class CompactionError(Exception):
    """The session could not be compacted; nothing was changed."""


class NoModel(CompactionError):
    """No model to summarise with was named or used by the session."""


@dataclass(frozen=True, slots=True)
class Compaction:
    session_id: str
    model: str
    messages: int
    dropped: int
    tokens_before: int
    tokens_after: int
    snapshot: str

    @property
    def changed(self) -> bool:
        return self.dropped > 0

    def __str__(self) -> str:
        return describe(self)


async def compact_session(rt: Runtime, session_id: str, *, model: str | None = None) -> Compaction:
    session = await threads.to_thread(rt.store.get_session, session_id)
    if session is None:
        raise SessionNotFound(f"no session {session_id!r}: see `memlane sessions list`")
    stored = await threads.to_thread(rt.store.list_messages, session.id)
    messages: list[Message] = [s.message for s in stored if s.status == "ok"]
    ledger = store_ledger(rt, session)
    plan = await threads.to_thread(ledger.load_plan)
    conversation = [m for m in messages if m.origin == "client"]
    if not plan.matches(conversation):
        plan = type(plan)()
    chosen = model or plan.model or rt.settings.llm_model
    if not chosen:
        raise NoModel(
            "no model to summarise with: the session has not used one yet; pass --model "
            "or set MEMLANE_LLM_MODEL"
        )
    gov = make_governor(rt, model=chosen, ledger=ledger, llm=rt.llm, summary_model=chosen)
    before = gov.total(gov.render(plan, messages))
    stats = Stats()
    new_plan = await gov.compact(plan, messages, stats, force=True)
    if stats.summariser_calls and not stats.summarised:
        raise CompactionError(
            f"the summariser ({chosen}) failed, the session is unchanged: {stats.summary_failure}"
        )
    after = gov.total(gov.render(new_plan, messages))
    if new_plan != plan and after < before:
        await threads.to_thread(ledger.save_plan, new_plan)
        event = context_event(stats, new_plan, gov.budget, before=before, after=after, manual=True)
        await threads.to_thread(ledger.record_event, EVENT_COMPACTED, event, "")
        if stats.summarised:
            await threads.to_thread(write_anchor, rt, session, new_plan.snapshot)
    else:
        new_plan, after = plan, before
    return Compaction(
        session_id=session.id,
        model=chosen,
        messages=len(conversation),
        dropped=stats.dropped if new_plan is not plan else 0,
        tokens_before=before,
        tokens_after=after,
        snapshot=new_plan.snapshot,
    )


def describe(result: Compaction) -> str:
    """One line for people (the CLI, the chat REPL)."""
    if not result.changed:
        return f"nothing to compact in {result.session_id} ({result.tokens_before} tokens)"
    return (
        f"compacted {result.session_id}: {result.dropped} of {result.messages} messages folded "
        f"into the snapshot with {result.model}; {result.tokens_before} -> "
        f"{result.tokens_after} tokens"
    )
