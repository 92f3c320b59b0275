"""Order the stages of a turn. See `engine.turn` for the picture."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from memlane.engine import failopen, scaffold, threads, turnlog, waits
from memlane.engine.failopen import best_effort
from memlane.engine.governance import counted, govern_turn
from memlane.engine.memory import marks
from memlane.engine.memory.ingest import schedule_ingest
from memlane.engine.memory.recall import Ahead, recall_for_turn, search_ahead
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.asked import first_asked
from memlane.engine.sessions.children import open_session
from memlane.engine.sessions.indexing import schedule_index
from memlane.engine.sessions.lifecycle import title_from_prompt
from memlane.engine.sessions.references import has_references, resolve_references
from memlane.engine.storing import keep, writes_behind
from memlane.engine.turn import Answer, DirectAnswer, Forward, Prepared, Turn
from memlane.store import NewMessage, SyncResult
from memlane.types import Message, Session

log = logging.getLogger("memlane.pipeline")

EVENT_CACHE_USAGE = "usage.cache"
"""Per answer, the prompt tokens the upstream read from and wrote to its prompt cache."""


async def prepare(rt: Runtime, turn: Turn) -> Prepared:
    """Decide: forward these messages, or answer directly; the client's turn is stored.

    What a turn forwards depends only on what earlier turns stored, so the client's
    new messages (and what the scaffold keeps) are stored while the request is on
    its way upstream (`store_behind`). Where the request depends on its own messages
    being stored (an `@@` reference, server-side history, a continued Responses
    conversation) they are stored first. Storing is memlane's own work, so it fails
    open like every stage after it (`engine.failopen`): the request goes on without
    it. An `@@` reference that names no session is the one thing the user is
    answered about directly (`DirectAnswer`): forwarding would hide the typo.
    """
    rt.client_pace.arrived(turn.key)
    ahead = None
    if has_references(turn.messages):
        await _settled(rt, turn)
        stored_now = threads.to_thread(_stored_incoming, rt, turn)
        if not await waits.within(rt, turn, "storing the turn's messages", stored_now, False):
            turn.lost = True
        resolved = await resolve_references(rt, turn, list(turn.messages))
        if isinstance(resolved, DirectAnswer):
            return resolved
        messages = await best_effort(
            rt, turn, "scaffold", scaffold.add_state_block(rt, turn, resolved), resolved
        )
    else:  # one worker-thread trip (or none: `reads_here`) shapes the request, storing it
        # first where it must, then runs recall on it while governance works on the loop
        messages, ahead = await _shape(rt, turn, search_ahead(rt, turn))
    turn.clock.mark("shape")
    messages = await best_effort(rt, turn, "governance", govern_turn(rt, turn, messages), messages)
    turn.clock.mark("governance")
    recalled = await best_effort(
        rt,
        turn,
        "recall",
        recall_for_turn(rt, turn, messages, ahead),
        messages,
        deadline_ms=rt.settings.recall_deadline_ms,
    )
    turn.clock.mark("recall")
    return Forward(recalled)


def stored_first(rt: Runtime, turn: Turn) -> bool:
    """Whether the turn's messages are stored before it is shaped, not on its way upstream:
    memlane supplies its history (it must hold the new messages first), or it continues a
    conversation the upstream keeps (its messages are appended as they come), or nothing
    of it is stored at all (ephemeral)."""
    return turn.ephemeral or turn.continued or history.asked(rt, turn)


async def _shape(
    rt: Runtime, turn: Turn, search: Callable[[list[Message]], Ahead] | None
) -> tuple[list[Message], asyncio.Future[Ahead] | None]:
    """The shaped request, and the recall `search` runs on it next, in the same worker-thread
    trip or, where reading is cheaper than the trip, right here (`reads_here`)."""
    then = None if search is None else (lambda shaped: search(shaped[0]))
    if stored_first(rt, turn):
        await _settled(rt, turn)
        stored, ahead = threads.one_trip(lambda: (store_and_scaffold(rt, turn), []), then)
        done = await waits.within(rt, turn, "storing and shaping the request", stored, None)
        if done is None:  # forwarded as sent; its answer is not stored after it
            turn.lost = True
            return list(turn.messages), None
        return done[0], ahead
    incoming = rt.turn_order.incoming(turn.key)
    if incoming is not None and not await incoming:  # the turn before was answered first
        waits.overran(rt, turn, "storing the session's previous turn")
    # the session's turns before this one; an answer among them whose storing waits for
    # this request to go upstream is asked for then (`proxy.turns.send_upstream`)
    earlier = rt.turn_order.behind(turn.key, hurry=False)
    release = rt.turn_order.hold(turn.key, messages=True)  # the next turn waits for this one
    try:
        trip = threads.here if reads_here(rt) and _found_here(rt, turn) else threads.one_trip
        shaped, ahead = trip(lambda: shape(rt, turn), then)
        done = await waits.within(rt, turn, "shaping the request", shaped, None)
        if done is None:  # forwarded as sent, stored from the client's next request
            raise _Late
        messages, writes = done
    except BaseException as exc:
        earlier.close()
        release()
        if turn.made_ahead is not None:  # no row will be written for it
            rt.sessions_ahead.forget(turn.made_ahead)
        if not isinstance(exc, _Late):
            raise
        turn.lost = True
        return list(turn.messages), None
    turn.writes_behind = []  # governance's plan and anchor join the messages' commit
    turn.storing = keep(asyncio.ensure_future(_store_behind(rt, turn, earlier, writes)))
    _release_once_stored(turn, release)
    return messages, ahead


class _Late(Exception):
    """Shaping the request outlasted the request's wait (`engine.waits`)."""


async def _settled(rt: Runtime, turn: Turn) -> None:
    """Once the session's earlier turns are stored, or the wait for them gave up."""
    if not await rt.turn_order.settled(turn.key):
        waits.overran(rt, turn, "storing the session's earlier turns")


def _found_here(rt: Runtime, turn: Turn) -> bool:
    """Whether the turn's session is read (or, new, made ahead of its row) here, so that
    shaping it only reads. A subagent's new session is made in a worker thread, under its
    parent's."""
    found = rt.store.find_session_state(turn.key, tenant=turn.tenant)
    if found is not None:
        turn.session, turn.state = found
    elif turn.parent_key is None:
        made = rt.sessions_ahead.made(turn.key, namespace=turn.namespace, tenant=turn.tenant)
        turn.session, turn.state, turn.made_ahead = made, {}, made
    return turn.session is not None


def reads_here(rt: Runtime) -> bool:
    """Whether a turn whose shaping only reads (its session exists, or is new and made
    ahead of its row: `engine.sessions.ahead`) is shaped, and its recall searched, on the
    event loop itself, not in a worker thread: on SQLite, when
    recall embeds nothing (no model, no embeddings call), and while no other request is in
    memlane's hands (answers being stored do not count: they wait on a worker thread).

    SQLite reads come from this machine's page cache in tens of microseconds; handing them
    to a worker thread cost more than the reads: the sleeping thread is woken, and the
    loop is woken again with the result (0.2 to 0.9 ms each way on the 2-core development
    machine, traced per stage). Both hold the GIL for their Python part either way.
    PostgreSQL's reads are network round trips: those stay on a worker thread (where a
    new session's row is written in front of the request), as does a recall that embeds
    its query. So do all requests while others are in hand: under 200 streaming
    clients, shaping every arrival on the loop stretched p99 (7–11 s to 15 s, `load.py`)
    as streams already under way waited behind it."""
    return rt.store_kind == "sqlite" and not rt.settings.dense_retrieval and threads.TRAFFIC.alone


def shape(rt: Runtime, turn: Turn) -> tuple[list[Message], scaffold.Writes]:
    """The request with its scaffold, from what earlier turns stored (read only, but for
    a new session's row), and what the scaffold keeps once the turn is stored."""
    if turn.session is None:
        turn.session = _open(rt, turn)
    messages = list(turn.messages)
    if not scaffold.applies(rt, turn):
        return messages, []
    session_id = turn.session.id
    client = [m for m in turn.messages if m.origin == "client"]
    try:
        return scaffold.state_block(
            rt, turn, messages, edit=lambda: rt.store.edit_point(session_id, client)
        )
    except Exception as exc:  # the scaffold is best effort
        _scaffold_failed(rt, turn, exc)
        return messages, []


def _open(rt: Runtime, turn: Turn) -> Session:
    return open_session(
        rt.store, turn.key, namespace=turn.namespace, tenant=turn.tenant, parent_key=turn.parent_key
    )


def _release_once_stored(turn: Turn, release: Callable[[], None]) -> None:
    """Call `release` once the turn's messages and every write queued behind them
    (`storing.after_storing`: governance's plan and anchor) are stored: the session's
    next turn reads all of them."""
    storing = turn.storing
    assert storing is not None

    def done(_: object) -> None:
        if turn.storing is storing or turn.storing is None:
            release()
        else:  # a write was queued behind it meanwhile
            _release_once_stored(turn, release)

    storing.add_done_callback(done)


async def _store_behind(
    rt: Runtime, turn: Turn, earlier: Coroutine[Any, Any, bool], writes: scaffold.Writes
) -> None:
    """Store the turn's messages, then what its scaffold keeps, once the session's
    earlier turns are stored; a failure is recorded, never raised (the request has
    gone upstream: it gets its answer, and its client's next request resends them)."""
    try:
        if not await earlier:  # the session's next turn is not held up further by them
            waits.overran(rt, turn, "storing the session's earlier turns")
        await threads.to_thread(_store_with, rt, turn, writes, writes_behind(turn))
    except Exception as exc:
        turn.lost = True
        await failopen.record(rt, turn, "store", str(exc) or type(exc).__name__, type(exc).__name__)
    finally:
        if turn.made_ahead is not None:
            rt.sessions_ahead.forget(turn.made_ahead)


def _store_with(
    rt: Runtime, turn: Turn, writes: scaffold.Writes, behind: list[Callable[[], None]]
) -> None:
    """A new session's row, the turn's messages with its identity, what its scaffold keeps
    and the writes queued behind them (each handles its own failure): one commit, so the
    write lock is taken, and the search indexes catch up, once per turn. Messages that
    fail to store undo only themselves (a savepoint), and raise once the rest is
    committed: the row stays for the failure's record."""
    failed: Exception | None = None
    with rt.store.transaction():
        if turn.made_ahead is not None:
            turn.session = rt.sessions_ahead.write(rt.store, turn.made_ahead)
        try:
            with rt.store.transaction():
                store_incoming(rt, turn)
        except Exception as exc:
            failed = exc
        else:
            _keep_scaffold(rt, turn, writes)
        for write in behind:
            _queued(rt, write)
    if failed is not None:
        raise failed


def _keep_scaffold(rt: Runtime, turn: Turn, writes: scaffold.Writes) -> None:
    for write in writes:
        try:
            with rt.store.transaction():  # a write that fails undoes itself whole
                write()
        except Exception as exc:  # the scaffold is best effort: the turn is stored
            _scaffold_failed(rt, turn, exc)
            return


def _queued(rt: Runtime, write: Callable[[], None]) -> None:
    """A write queued behind the turn handles its own failure; one that does not still
    undoes only itself, never the turn's commit."""
    try:
        with rt.store.transaction():
            write()
    except Exception:
        log.exception("a write queued behind a turn's messages failed")


async def stored(rt: Runtime, turn: Turn) -> None:
    """Once the turn's own messages are stored, or could not be: before its answer is
    stored, and, for a client that will not resend them, before it has the whole answer.
    Never raises."""
    storing = turn.storing
    if storing is None or storing.done():
        if storing is not None and storing.cancelled():
            turn.lost = True
        return
    rt.turn_order.hurry(turn.key)  # they are stored after the session's answers before them
    if not await waits.within(rt, turn, "storing the turn's messages", _stored(storing), False):
        turn.lost = True  # its answer is not stored after them: the next request brings it


async def _stored(storing: asyncio.Future[None]) -> bool:
    await asyncio.wait([storing])
    return not storing.cancelled()


def store_and_scaffold(rt: Runtime, turn: Turn) -> list[Message]:
    store_incoming(rt, turn)
    messages = list(turn.messages)
    try:
        return scaffold.with_state_block(rt, turn, messages)
    except Exception as exc:  # the scaffold is best effort: the turn is already stored
        _scaffold_failed(rt, turn, exc)
        return messages


def _scaffold_failed(rt: Runtime, turn: Turn, exc: Exception) -> None:
    rt.activity.failure("scaffold", f"{type(exc).__name__}: {exc}")
    log.warning("scaffold skipped for session %s: %r", turn.key[:8], exc)


async def finish(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """Persist the assistant's answer and usage; everything slow goes to the background."""
    await stored(rt, turn)
    if turn.counting is not None:  # for the turn's record
        await waits.within(rt, turn, "counting the request's tokens", counted(turn), None)
    await waits.within(rt, turn, "storing the answer", _store_answer_then(rt, turn, answer), None)


async def _store_answer_then(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """The answer stored, then the turn's background work queued: late (`engine.waits`),
    both still happen, after the client has its answer."""
    await threads.to_thread(store_answer, rt, turn, answer)
    if turn.session is None or turn.lost or answer.failed:
        return
    schedule_ingest(rt, turn, answer)
    schedule_index(rt, turn)
    history.schedule_summary(rt, turn)


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
        turn.session = _open(rt, turn)
    client = [m for m in turn.messages if m.origin == "client"]
    turn.server_history = history.wanted(rt, turn) and not history.carries_history(rt, turn)
    remember_identity(rt, turn)
    if turn.server_history:
        client = [m for m in client if m.role not in ("system", "developer")]
    counted = [NewMessage(m, rt.tokenizer.count_message(m)) for m in client]
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


def _stored_incoming(rt: Runtime, turn: Turn) -> bool:
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
        prompt = first_asked(turn.messages)
        title = title_from_prompt(prompt) if prompt else None
    if metadata != session.metadata or title is not None:
        turn.session = rt.store.update_session(session.id, title=title, metadata=metadata)


def store_answer(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """The answer, its usage and the turn's record (`engine.turnlog`), in one commit; not
    when the client's own messages could not be stored (it would answer nothing stored)."""
    if turn.session is None or turn.lost:
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
