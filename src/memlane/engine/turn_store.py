"""What a turn stores: its messages, its session's identity, what its scaffold keeps, its
answer and its record. Each function here runs in the store's writer thread, queued by
the request path (`engine.pipeline`, through `engine.storing`), in the order the turn
makes them; none of them is awaited by a request unless it must be.
"""

from __future__ import annotations

import contextlib
import logging

from memlane.engine import failopen, scaffold, turnlog
from memlane.engine.memory import marks
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.ahead import write_made
from memlane.engine.sessions.asked import first_asked
from memlane.engine.sessions.children import open_session
from memlane.engine.sessions.lifecycle import title_from_prompt
from memlane.engine.turn import Answer, Turn
from memlane.store import CountWhenStored, NewMessage, SyncResult, Usage
from memlane.types import Message, Session

log = logging.getLogger("memlane.pipeline")  # the name these warnings always had

EVENT_CACHE_USAGE = "usage.cache"
"""Per answer, the prompt tokens the upstream read from and wrote to its prompt cache."""


def store_incoming(rt: Runtime, turn: Turn) -> None:
    """The client's messages: what is new in its resent history is stored (`Store.
    sync_messages`), with the session's model, client and title.

    With server-side history the request's messages are new ones: they are appended,
    and the turn's messages become the session's working context ending with them.
    """
    if turn.ephemeral or turn.synced is not None:
        return
    store = rt.store
    if turn.session is None:
        turn.session = open_session_of(rt, turn)
    client = [m for m in turn.messages if m.origin == "client"]
    turn.server_history = history.wanted(rt, turn) and not history.carries_history(rt, turn)
    remember_identity(rt, turn)
    if turn.server_history:
        client = [m for m in client if m.role not in ("system", "developer")]
    counted = CountWhenStored(client, rt.tokenizer.count_message)  # the new ones only
    state = turn.stored_state(store) if marks.wanted(rt.settings) else {marks.MARK: ""}
    first_mark = marks.MARK not in state  # set in the commit of the messages it is about
    with store.transaction() if first_mark else contextlib.nullcontext():
        if turn.continued or turn.server_history:
            added = store.append_messages(turn.session.id, counted)
            end = added[-1].position + 1 if added else None
            turn.synced = SyncResult(matched=0, added=tuple(added), superseded=0, next_position=end)
        else:
            turn.synced = store.sync_messages(turn.session.id, counted)
        first = turn.synced.added[0].position if turn.synced.added else None
        marks.note_first_turn(store, turn.session.id, state, first)
    if turn.server_history:
        turn.messages = history.with_server_history(rt, turn)


def stored_incoming(rt: Runtime, turn: Turn) -> bool:
    """`store_incoming`, True once done (a late one is told apart: `engine.waits`)."""
    store_incoming(rt, turn)
    return True


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
    known: dict[str, object] = {}
    if turn.model:
        known["model"] = turn.model
    if turn.client:
        known["client"] = turn.client
    if turn.server_history:
        known[history.META] = "server"
    if turn.managed:
        known[scaffold.META] = "on"
    title = None
    if not session.title:
        prompt = first_asked(turn.messages)
        title = title_from_prompt(prompt) if prompt else None
    if all(session.metadata.get(k) == v for k, v in known.items()) and title is None:
        return
    # the row as it is now: the turn read it before it was shaped, and background work
    # (a session's index) may have written its metadata since
    fresh = rt.store.get_session(session.id) or session
    metadata = {**fresh.metadata, **known}
    turn.session = rt.store.update_session(session.id, title=title, metadata=metadata)


def store_with(rt: Runtime, turn: Turn, writes: scaffold.Writes) -> None:
    """In the store's writer: a new session's row, the turn's messages with its identity,
    and what its scaffold keeps. Messages that fail to store undo only themselves (a
    savepoint) and mark the turn lost (its answer is not stored after them: the client's
    next request resends both); the row stays for the failure's record."""
    _row(rt, turn)
    try:
        with rt.store.transaction():
            store_incoming(rt, turn)
    except Exception as exc:
        turn.lost = True
        session_id = turn.session.id if turn.session else None
        failopen.record_here(rt, session_id, "store", str(exc), type(exc).__name__)
        return
    _keep_scaffold(rt, turn, writes)


def _row(rt: Runtime, turn: Turn) -> None:
    """A new session's row, written by the first of the turn's writes that runs (the row
    another turn or process wrote first, if one did)."""
    if turn.made_ahead is not None:
        turn.session = write_made(rt.store, turn.made_ahead)


def _keep_scaffold(rt: Runtime, turn: Turn, writes: scaffold.Writes) -> None:
    for write in writes:
        try:
            with rt.store.transaction():  # a write that fails undoes itself whole
                write()
        except Exception as exc:  # the scaffold is best effort: the turn is stored
            scaffold_failed(rt, turn, exc)
            return


def store_and_scaffold(rt: Runtime, turn: Turn) -> list[Message]:
    """The turn's messages stored, then the request shaped from what is now stored: for a
    turn whose request depends on its own messages (`pipeline.stored_first`)."""
    store_incoming(rt, turn)
    messages = list(turn.messages)
    try:
        return scaffold.with_state_block(rt, turn, messages)
    except Exception as exc:  # the scaffold is best effort: the turn is already stored
        scaffold_failed(rt, turn, exc)
        return messages


def open_session_of(rt: Runtime, turn: Turn) -> Session:
    """The turn's session row, found or made (a subagent's forked from its parent's)."""
    return open_session(
        rt.store, turn.key, namespace=turn.namespace, tenant=turn.tenant, parent_key=turn.parent_key
    )


def store_answer(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """The answer, its usage and the turn's record (`engine.turnlog`), in one commit: one
    of the store's writes, which runs each in a transaction of its own (no second one
    here: on PostgreSQL a savepoint is two round trips); not when the client's own
    messages could not be stored (it would answer nothing stored)."""
    if turn.session is None or turn.lost:
        return
    _row(rt, turn)  # a new session's turn that failed before its messages were queued
    counted = [NewMessage(m, rt.tokenizer.count_message(m)) for m in answer.messages]
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
    usage = Usage(
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost_usd=turnlog.turn_cost(rt.settings, answer.prompt_tokens, answer.completion_tokens),
    )
    # once, if stored late; its usage counted either way
    store.append_messages(session_id, counted, unless_from=since, usage=usage)
    if answer.response_id:
        history.remember_response(rt, session_id, answer.response_id)
    if answer.cache_read_tokens or answer.cache_creation_tokens:
        store.add_event(
            session_id,
            EVENT_CACHE_USAGE,
            {"read": answer.cache_read_tokens, "created": answer.cache_creation_tokens},
            active=False,  # the messages' append marked the session active
        )
    turnlog.record_turn(store, rt.settings, turn, answer, stored=True)


def scaffold_failed(rt: Runtime, turn: Turn, exc: Exception) -> None:
    """The scaffold is best effort: its failure is recorded and logged, the turn goes on."""
    rt.activity.failure("scaffold", f"{type(exc).__name__}: {exc}")
    log.warning("scaffold skipped for session %s: %r", turn.key[:8], exc)
