"""Order the stages of a turn. See `engine.turn` for the picture."""

from __future__ import annotations

import logging

from memlane.engine import scaffold, threads, turnlog
from memlane.engine.failopen import best_effort
from memlane.engine.governance import govern_turn
from memlane.engine.memory.ingest import schedule_ingest
from memlane.engine.memory.recall import recall_for_turn, search_ahead
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.children import open_session
from memlane.engine.sessions.indexing import schedule_index
from memlane.engine.sessions.lifecycle import title_from_prompt
from memlane.engine.sessions.references import has_references, resolve_references
from memlane.engine.sessions.serialize import is_conversation
from memlane.engine.turn import Answer, DirectAnswer, Forward, Prepared, Turn
from memlane.store import NewMessage, SyncResult
from memlane.types import Message

log = logging.getLogger("memlane.pipeline")

EVENT_CACHE_USAGE = "usage.cache"
"""Per answer, the prompt tokens the upstream read from and wrote to its prompt cache."""


async def prepare(rt: Runtime, turn: Turn) -> Prepared:
    """Persist what is new, then decide: forward these messages, or answer directly.

    Storing the client's turn is strict (nothing is lost); every stage after it is
    memlane's own addition and fails open (`engine.failopen`): the request goes on
    without it. An `@@` reference that names no session is the one thing the user
    is answered about directly (`DirectAnswer`): forwarding would hide the typo.
    The session's earlier answers are stored first (`engine.turnorder`).
    """
    await rt.turn_order.settled(turn.key)
    ahead = None
    if has_references(turn.messages):
        await threads.to_thread(store_incoming, rt, turn)
        resolved = await resolve_references(rt, turn, list(turn.messages))
        if isinstance(resolved, DirectAnswer):
            return resolved
        messages = await best_effort(
            rt, turn, "scaffold", scaffold.add_state_block(rt, turn, resolved), resolved
        )
    else:  # the references stage has nothing to do: one thread hop stores and scaffolds,
        # while recall searches what earlier turns stored in another
        ahead = search_ahead(rt, turn)
        try:
            messages = await threads.to_thread(store_and_scaffold, rt, turn)
        except BaseException:
            if ahead is not None:
                ahead.cancel()
            raise
    messages = await best_effort(rt, turn, "governance", govern_turn(rt, turn, messages), messages)
    recalled = await best_effort(
        rt,
        turn,
        "recall",
        recall_for_turn(rt, turn, messages, ahead),
        messages,
        deadline_ms=rt.settings.recall_deadline_ms,
    )
    return Forward(recalled)


def store_and_scaffold(rt: Runtime, turn: Turn) -> list[Message]:
    store_incoming(rt, turn)
    messages = list(turn.messages)
    try:
        return scaffold.with_state_block(rt, turn, messages)
    except Exception as exc:  # the scaffold is best effort: the turn is already stored
        rt.activity.failure("scaffold", f"{type(exc).__name__}: {exc}")
        log.warning("scaffold skipped for session %s: %r", turn.key[:8], exc)
        return messages


async def finish(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """Persist the assistant's answer and usage; everything slow goes to the background."""
    await threads.to_thread(store_answer, rt, turn, answer)
    if turn.session is None or answer.failed:
        return
    schedule_ingest(rt, turn, answer)
    schedule_index(rt, turn)
    history.schedule_summary(rt, turn)


def store_incoming(rt: Runtime, turn: Turn) -> None:
    """The user's turn is durable before anything is forwarded (nothing is lost).

    With server-side history the request's messages are new ones: they are appended,
    and the turn's messages become the session's working context ending with them.
    """
    if turn.ephemeral or turn.synced is not None:
        return
    store = rt.store
    if turn.session is None:
        turn.session = open_session(
            store,
            turn.key,
            namespace=turn.namespace,
            tenant=turn.tenant,
            parent_key=turn.parent_key,
        )
    client = [m for m in turn.messages if m.origin == "client"]
    turn.server_history = history.wanted(rt, turn) and not history.carries_history(rt, turn)
    remember_identity(rt, turn)
    if turn.server_history:
        client = [m for m in client if m.role not in ("system", "developer")]
    counted = [NewMessage(m, rt.tokenizer.count_message(m)) for m in client]
    if turn.continued or turn.server_history:
        added = store.append_messages(turn.session.id, counted)
        end = added[-1].position + 1 if added else None
        turn.synced = SyncResult(matched=0, added=tuple(added), superseded=0, next_position=end)
    else:
        turn.synced = store.sync_messages(turn.session.id, counted)
    if turn.server_history:
        turn.messages = history.with_server_history(rt, turn)


def remember_identity(rt: Runtime, turn: Turn) -> None:
    """The session's model, client and first-prompt title, in one write when one changed.

    The model and client are remembered once per session (and on a change), so work
    started outside a request (`sessions ask`, `sessions index`, `sessions context`) can
    use the model the conversation used, and a person sees which client holds the
    session; so are whether memlane supplies its history and adds the scaffold (what
    `sessions context` needs to say what the next request forwards). The title is set
    once, so listing sessions never reads their messages.
    """
    session = turn.session
    assert session is not None
    metadata = dict(session.metadata)
    if turn.model:
        metadata["model"] = turn.model
    if turn.client:
        metadata["client"] = turn.client
    if turn.server_history:
        metadata[history.META] = "server"
    if turn.managed:
        metadata[scaffold.META] = "on"
    title = None
    if not session.title:
        users = (m.text for m in turn.messages if m.role == "user" and is_conversation(m))
        prompt = next(users, "")
        title = title_from_prompt(prompt) if prompt.strip() else None
    if metadata != session.metadata or title is not None:
        turn.session = rt.store.update_session(session.id, title=title, metadata=metadata)


def store_answer(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """The answer, its usage and the turn's record (`engine.turnlog`), in one commit."""
    if turn.session is None:
        return
    counted = [NewMessage(m, rt.tokenizer.count_message(m)) for m in answer.messages]
    with rt.store.transaction():
        _store_answer(rt, turn, answer, counted)


def _store_answer(rt: Runtime, turn: Turn, answer: Answer, counted: list[NewMessage]) -> None:
    assert turn.session is not None
    store = rt.store
    session_id = turn.session.id
    if answer.failed:
        if turn.synced is not None and turn.synced.added:
            store.set_message_status(turn.synced.added[-1].id, "failed")
        turnlog.record_turn(store, rt.settings, turn, answer)
        return
    since = turn.synced.next_position if turn.synced is not None else None
    store.append_messages(session_id, counted, unless_from=since)  # once, if stored late
    if answer.response_id:
        history.remember_response(rt, session_id, answer.response_id)
    store.add_usage(
        session_id,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost_usd=turnlog.turn_cost(rt.settings, answer.prompt_tokens, answer.completion_tokens),
    )
    if answer.cache_read_tokens or answer.cache_creation_tokens:
        store.add_event(
            session_id,
            EVENT_CACHE_USAGE,
            {"read": answer.cache_read_tokens, "created": answer.cache_creation_tokens},
        )
    turnlog.record_turn(store, rt.settings, turn, answer)
