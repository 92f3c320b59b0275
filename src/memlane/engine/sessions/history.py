"""Server-side history: the client sends only what is new, memlane supplies the rest.

Many clients keep no history (shell scripts, small bots, chat front-ends that send
the last message). With `X-Memlane-History: server` (or `MEMLANE_HISTORY=server`)
memlane stores the new messages and forwards the session's working context in front
of them: the running summary as a system message, then the messages it does not
cover. A client that does send its history is recognised and never fed twice.
Summarising happens after the response, in the background.
"""

from __future__ import annotations

import functools
import logging
from typing import Literal

from memlane.engine.background import session_policy
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.working import current_context, fold
from memlane.engine.turn import Turn
from memlane.files.locks import SUMMARY_LOCKS, HomeLock
from memlane.types import Message, Session

log = logging.getLogger("memlane.sessions.history")

HistoryMode = Literal["client", "server"]
FLAG = "history"
"""The `X-Memlane-History` header, read from the turn's flags."""
META = "history"
"""Session metadata key set to `server` once memlane supplied the session's history."""


def uses_server_history(session: Session) -> bool:
    """Whether the session's requests get their history from memlane (seen at least once)."""
    return session.metadata.get(META) == "server"


def wanted(rt: Runtime, turn: Turn) -> bool:
    """Whether memlane supplies this turn's history: asked, and the session is open."""
    return turn.session is not None and asked(rt, turn)


def asked(rt: Runtime, turn: Turn) -> bool:
    """Whether this turn asks memlane to supply the history (header, else the setting;
    a Responses chain memlane resolved), known before its session is looked up."""
    if turn.chained:
        return True
    mode = turn.flags.get(FLAG, "").strip().lower() or rt.settings.history
    return mode == "server" and not turn.continued


def carries_history(rt: Runtime, turn: Turn) -> bool:
    """The request resends the conversation itself: its first message is the session's first.

    A single new message is never a resend, even when it repeats the first one
    ("hi" twice is two turns).
    """
    assert turn.session is not None
    own = [m for m in turn.messages if m.role not in ("system", "developer")]
    if len(own) < 2:
        return False
    first = rt.store.list_messages(turn.session.id, transcript_only=True)[:1]
    return bool(first) and first[0].message.fingerprint() == own[0].fingerprint()


def with_server_history(rt: Runtime, turn: Turn) -> list[Message]:
    """The request's system messages, then the session's history: the new messages were
    stored before this is called, so the history already ends with them.

    A chained Responses request gets every stored item (tool calls and results
    included, as the upstream would have kept them); otherwise the working context.
    """
    assert turn.session is not None
    system = [m for m in turn.messages if m.role in ("system", "developer")]
    if turn.chained:
        stored = rt.store.list_messages(turn.session.id)
        return system + [s.message for s in stored if s.status == "ok"]
    return system + current_context(rt, turn.session.id).messages


RESPONSE_META = "response:"
"""Meta key prefix: a Responses answer's id -> the session that holds it."""


def remember_response(rt: Runtime, session_id: str, response_id: str) -> None:
    rt.store.set_meta(RESPONSE_META + response_id, session_id)


def chained_session_key(rt: Runtime, response_id: str, tenant: str = "") -> str | None:
    """The key of the session whose answer had `response_id`, if memlane stored it in
    `tenant`'s session (another tenant's answer id is left for the upstream, as unknown)."""
    session_id = rt.store.get_meta(RESPONSE_META + response_id)
    session = rt.store.get_session(session_id) if session_id else None
    return session.key if session is not None and session.tenant == tenant else None


def schedule_summary(rt: Runtime, turn: Turn) -> None:
    """Fold the session into its running summary after the response, when it is on: once
    per batch of the session's turns (`Background.batch`), with the latest turn's model."""
    if not rt.settings.summary_enabled or turn.session is None or turn.ephemeral:
        return
    key = f"session-summary:{turn.session.id}"
    run = functools.partial(_fold_batch, rt, turn.session.id)
    model, policy = turn.model or None, session_policy(rt.settings)
    # past the queue's bound the key alone waits: its job folds what the store holds
    rt.background.batch(key, model, run, policy, name=key, stand_in=model)


async def _fold_batch(rt: Runtime, session_id: str, models: list[str | None]) -> None:
    await fold_once(rt, session_id, model=models[-1])


async def fold_once(rt: Runtime, session_id: str, *, model: str | None) -> None:
    """`fold` under the session's summary lock: two turns finished at once, here or in
    another worker, fold the session once (the second finds nothing left to fold)."""
    async with HomeLock.striped(rt.settings.home_path, SUMMARY_LOCKS, session_id).hold():
        await fold(rt, session_id, model=model)
