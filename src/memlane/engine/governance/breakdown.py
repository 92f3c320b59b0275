"""What a session's next request would forward, part by part (`memlane sessions context`).

The next request is taken to be the stored conversation resent as it is (the
client's history, or memlane's working context for a server-history session),
under the session's current plan, with the session's state blocks, the snippets
of dropped history and the long-term memories its latest user message recalls.
Nothing is written and no LLM is called: a compaction the next request would
start is reported (`compacts_next`), not run. Request headers are not known
here, so a TODO or Spec Mode sent only by header is not counted.

Parts, in the order the request carries them:

- head: the instructions and the first run, kept verbatim;
- snapshot: what stands for the dropped middle (governance's snapshot, or the
  running summary of a server-history session);
- tail: the newest messages, verbatim or as tool-output previews;
- scaffold: the `<memlane_state>` blocks (pinned, anchor, todo, spec);
- memories: the long-term memory block the read path injects;
- snippets: dropped history re-injected for the current user message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memlane.engine import scaffold, threads
from memlane.engine.governance import recall, render
from memlane.engine.governance.budget import compacts_itself
from memlane.engine.governance.flow import recall_snippets
from memlane.engine.governance.ledger import EVENT_COMPACTED
from memlane.engine.governance.plan import Plan
from memlane.engine.governance.setup import make_governor, store_ledger
from memlane.engine.governance.structure import first_run_end, safe_cuts
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.working import current_context
from memlane.text.tokens import REPLY_PRIMING
from memlane.types import Message, Session

PARTS = ("head", "snapshot", "tail", "scaffold", "memories", "snippets")


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    tokens: int
    items: int


@dataclass(frozen=True)
class Breakdown:
    session_id: str
    model: str
    window: int
    window_source: str
    limit: int
    threshold: int
    target: int
    history: str
    """`client` (the client resends its history) or `server` (memlane supplies it)."""
    parts: tuple[Part, ...]
    total: int
    """Tokens as the budget counts them: the parts plus the reply priming."""
    compactions: int
    summarised: int
    """Messages the snapshot stands for."""
    masked: int
    notes: tuple[str, ...]
    events: tuple[dict[str, Any], ...]
    """The newest `governance.compacted` events, oldest first (payload plus `created_at`)."""

    @property
    def compacts_next(self) -> bool:
        """The next request would start a compaction even before its new message counts."""
        return bool(self.threshold) and self.total > self.threshold

    def part(self, name: str) -> Part:
        return next(p for p in self.parts if p.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "model": self.model,
            "window": self.window,
            "window_source": self.window_source,
            "limit": self.limit,
            "threshold": self.threshold,
            "target": self.target,
            "history": self.history,
            "parts": {p.name: {"tokens": p.tokens, "items": p.items} for p in self.parts},
            "total": self.total,
            "compacts_next": self.compacts_next,
            "compactions": self.compactions,
            "summarised": self.summarised,
            "masked": self.masked,
            "notes": list(self.notes),
            "events": list(self.events),
        }


async def breakdown(rt: Runtime, session: Session, *, events: int = 5) -> Breakdown:
    """The session's next request, by part, in tokens of its model."""
    notes: list[str] = []
    server = history.uses_server_history(session)
    messages = await threads.to_thread(_next_messages, rt, session, server)
    conversation = [m for m in messages if m.origin == "client"]
    ledger = store_ledger(rt, session)
    stored_plan = await threads.to_thread(ledger.load_plan)
    plan = stored_plan if stored_plan.matches(conversation) else Plan()
    model = str(session.metadata.get("model") or plan.model or rt.settings.llm_model or "")
    if not model:
        notes.append("the session has not named a model yet: the default window is assumed")
    client = await threads.to_thread(_client, rt, session)
    deferring = compacts_itself(client) and rt.settings.governance_defer_to_clients
    if deferring:
        notes.append(
            f"{client.split('/')[0]} compacts its own history: memlane compacts only what would "
            "not fit the limit (governance_defer_to_clients)"
        )
    gov = make_governor(
        rt, model=model, ledger=ledger, llm=None, summary_model=None, client_compacts=deferring
    )
    out = gov.render(plan, messages)
    tokens: dict[str, int] = dict.fromkeys(PARTS, 0)
    items: dict[str, int] = dict.fromkeys(PARTS, 0)

    def add(name: str, message: Message) -> None:
        tokens[name] += gov.count(message)
        items[name] += 1

    head_end = first_run_end(conversation, safe_cuts(conversation))
    snapshot = render.summary_message(plan).text if plan.trims else None
    in_tail = False
    seen = 0
    for message in out:
        if message.origin == "summary":
            add("snapshot", message)
            in_tail = in_tail or message.text == snapshot  # the splice: the tail follows
        elif message.origin == "state":
            add("scaffold", message)
        else:  # client items, and @@ references where they were sent
            if message.origin == "client" and not plan.trims and seen >= head_end:
                in_tail = True
            add("tail" if in_tail else "head", message)
            seen += message.origin == "client"
    pending = await threads.to_thread(_pending_block, rt, session)
    if pending is not None:
        add("scaffold", pending)
    query = _last_user_text(conversation)
    used = REPLY_PRIMING + sum(tokens.values())
    if plan.trims and query:
        snippets = await recall_snippets(gov, query, None, version=plan.version)
        found = recall.fitting_message(snippets, gov.budget.limit - used, gov.count)
        if found is not None:
            add("snippets", found)
    memory = await _memories(rt, session, query, out, trimmed=plan.trims, notes=notes)
    if memory is not None:
        add("memories", memory)
    recent = await threads.to_thread(rt.store.list_events, session.id, kind=EVENT_COMPACTED)
    budget = gov.budget
    return Breakdown(
        session_id=session.id,
        model=model,
        window=budget.window.tokens,
        window_source=budget.window.source,
        limit=budget.limit,
        threshold=budget.threshold,
        target=budget.target,
        history="server" if server else "client",
        parts=tuple(Part(name, tokens[name], items[name]) for name in PARTS),
        total=REPLY_PRIMING + sum(tokens.values()),
        compactions=plan.compactions,
        summarised=plan.summarised if plan.trims else 0,
        masked=len(plan.masked),
        notes=tuple(notes),
        events=tuple(
            {**e.payload, "created_at": e.created_at.isoformat()} for e in recent[-events:]
        ),
    )


def _client(rt: Runtime, session: Session) -> str:
    """The client of the session's newest turn (`engine.turnlog`), as it named itself."""
    from memlane.engine.turnlog import TURN_EVENT

    latest = rt.store.list_events(session.id, kind=TURN_EVENT, limit=1)
    return str(latest[-1].payload.get("client") or "") if latest else ""


def _next_messages(rt: Runtime, session: Session, server: bool) -> list[Message]:
    """What the next request would carry before memlane's stages: the resent history with
    the state blocks where they were sent, or the working context memlane would supply."""
    if server:
        placed = scaffold.load_blocks(rt.store.get_state(session.id))
        return scaffold.weave(current_context(rt, session.id).messages, placed)
    stored = rt.store.list_messages(session.id)
    return [s.message for s in stored if s.status == "ok"]


def _pending_block(rt: Runtime, session: Session) -> Message | None:
    """A new state block, when the session gets the scaffold at all."""
    managed = session.metadata.get(scaffold.META) == "on" or rt.settings.scaffold_clients == "all"
    return scaffold.pending_block(rt, session) if managed else None


async def _memories(
    rt: Runtime,
    session: Session,
    query: str,
    messages: Sequence[Message],
    *,
    trimmed: bool,
    notes: list[str],
) -> Message | None:
    """The long-term memory block the read path would inject for `query`, if any."""
    from memlane.engine.memory import recall as memory_recall
    from memlane.engine.memory import scopes
    from memlane.engine.memory.block import render

    settings = rt.settings
    if not settings.memory_enabled or not query.strip():
        return None
    if settings.memory_mode == "trimmed" and not trimmed:
        return None
    try:
        found = await memory_recall.recall(
            rt,
            query,
            scopes=scopes.recall_scopes(settings, session.id, session.namespace),
            exclude={m.text.strip() for m in messages if m.text},
        )
        if not found:
            return None
        summary = await memory_recall.conversation_summary(rt, session.id)
    except Exception as exc:  # the read path fails open; so does its preview
        notes.append(f"long-term memory could not be searched: {type(exc).__name__}: {exc}")
        return None
    return Message(role="user", text=render(found, summary), origin="recall")


def _last_user_text(conversation: Sequence[Message]) -> str:
    for message in reversed(conversation):
        if message.role == "user" and message.kind == "message":
            return message.text
    return ""
