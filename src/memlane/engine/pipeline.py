"""Order the stages of a turn. See `engine.turn` for the picture."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from memlane.engine import failopen, scaffold, storing, threads, turnlog, waits
from memlane.engine.failopen import best_effort
from memlane.engine.governance import counted, govern_turn
from memlane.engine.memory import marks
from memlane.engine.memory.ingest import schedule_ingest
from memlane.engine.memory.recall import Ahead, recall_for_turn, search_ahead
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.ahead import made_session, write_made
from memlane.engine.sessions.asked import first_asked
from memlane.engine.sessions.children import open_session
from memlane.engine.sessions.indexing import schedule_index
from memlane.engine.sessions.lifecycle import title_from_prompt
from memlane.engine.sessions.references import has_references, resolve_references
from memlane.engine.turn import Answer, DirectAnswer, Forward, Prepared, Turn
from memlane.store import CountWhenStored, NewMessage, SyncResult
from memlane.types import Message, Session

log = logging.getLogger("memlane.pipeline")

P = ParamSpec("P")
T = TypeVar("T")

EVENT_CACHE_USAGE = "usage.cache"
"""Per answer, the prompt tokens the upstream read from and wrote to its prompt cache."""


async def prepare(rt: Runtime, turn: Turn) -> Prepared:
    """Decide: forward these messages, or answer directly; the client's turn is queued to
    be stored.

    The turn first waits for its session's earlier writes (`engine.writes`), then reads
    what they stored and shapes the request from it; its new messages (and what the
    scaffold keeps) are queued to the store's writer while the request goes upstream.
    Where the request depends on its own messages being stored (an `@@` reference,
    server-side history, a continued Responses conversation) they are stored first.
    Storing is memlane's own work, so it fails open like every stage after it
    (`engine.failopen`): the request goes on without it. An `@@` reference that names no
    session is the one thing the user is answered about directly (`DirectAnswer`):
    forwarding would hide the typo.
    """
    if not await rt.writes.settled(turn.session_of):
        waits.overran(rt, turn, "storing the session's earlier turns")
    turn.clock.mark("wait")
    ahead = None
    if has_references(turn.messages):
        stored_now = storing.queue(
            rt, turn, lambda: _stored_incoming(rt, turn), messages=True, awaited=True
        )
        if not await waits.within(rt, turn, "storing the turn's messages", stored_now, False):
            turn.lost = True
        resolved = await resolve_references(rt, turn, list(turn.messages))
        if isinstance(resolved, DirectAnswer):
            return resolved
        messages = await best_effort(
            rt, turn, "scaffold", scaffold.add_state_block(rt, turn, resolved), resolved
        )
    else:  # shaped from what earlier turns stored, and recall searched on it, in one read
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


Search = Callable[[list[Message]], Ahead]


async def _shape(
    rt: Runtime, turn: Turn, search: Search | None
) -> tuple[list[Message], asyncio.Future[Ahead] | None]:
    """The shaped request and the recall `search` ran on it. Its messages are queued to be
    stored (or, where the request depends on them, stored first)."""
    if stored_first(rt, turn):
        stored = storing.queue(
            rt, turn, lambda: store_and_scaffold(rt, turn), messages=True, awaited=True
        )
        messages = await waits.within(rt, turn, "storing and shaping the request", stored, None)
        if messages is None:  # forwarded as sent; its answer is not stored after it
            turn.lost = True
            return list(turn.messages), None
        return messages, (None if search is None else _settled_read(rt, search, messages))
    if not await read_within(rt, turn, "reading the session", False, _found, rt, turn):
        turn.lost = True
        return list(turn.messages), None
    if turn.session is None:  # a subagent's first call: its session forks its parent's
        opened = storing.queue(rt, turn, lambda: _open(rt, turn), awaited=True)
        turn.session = await waits.within(rt, turn, "opening the subagent's session", opened, None)
        if turn.session is None:
            turn.lost = True
            return list(turn.messages), None
    shaped = await read_within(rt, turn, "shaping the request", None, _shaped, rt, turn, search)
    if shaped is None:  # forwarded as sent, stored from the client's next request
        turn.lost = True
        return list(turn.messages), None
    messages, writes, ahead = shaped
    storing.queue(rt, turn, lambda: _store_with(rt, turn, writes), messages=True, linger=True)
    return messages, (None if ahead is None else _outcome(*ahead))


def reads_on_the_loop(rt: Runtime) -> bool:
    """Whether the request path reads the store on the event loop itself, not in a worker
    thread: on SQLite, when recall embeds nothing. SQLite reads come from this machine's
    page cache in tens of microseconds; handing them to a worker thread cost more than the
    reads (the sleeping thread is woken, then the loop again with the result: 0.2 to
    0.9 ms each way on a 2-core machine). PostgreSQL's reads are network round trips, and
    embedding a query is model inference: those go to a worker thread."""
    return rt.store_kind == "sqlite" and not rt.settings.dense_retrieval


async def read(rt: Runtime, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args)`, a read of the store: here or in a worker thread (`reads_on_the_loop`)."""
    if reads_on_the_loop(rt):
        return fn(*args, **kwargs)
    return await threads.to_thread(fn, *args, **kwargs)


async def read_within(
    rt: Runtime, turn: Turn, what: str, late: T, fn: Callable[..., T], *args: Any
) -> T:
    """`fn(*args)`, a read of the store for the request, within its wait (`waits.within`):
    in a worker thread, or here when reads run on the loop. A read here has nothing to
    wait out (it is done when it returns), so it is called, not made a task and awaited:
    that cost two turns of the loop and a timer."""
    if reads_on_the_loop(rt):
        return fn(*args)
    return await waits.within(rt, turn, what, threads.to_thread(fn, *args), late)


def _settled_read(rt: Runtime, search: Search, messages: list[Message]) -> asyncio.Future[Ahead]:
    return asyncio.ensure_future(read(rt, search, messages))


def _outcome(value: T | None, error: Exception | None) -> asyncio.Future[T]:
    """A settled future of `value`, or of `error` (recall's own stage fails open on it)."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]
    return future


def _found(rt: Runtime, turn: Turn) -> bool:
    """The turn's session and its state, read; a new one made in memory, its row written
    first among the turn's writes (`_store_with`). A subagent's new session is left to
    be opened under its parent's (`_shape`)."""
    found = rt.store.find_session_state(turn.key, tenant=turn.tenant)
    if found is not None:
        turn.session, turn.state = found
    elif turn.parent_key is None:
        turn.session = turn.made_ahead = made_session(turn.key, turn.namespace, turn.tenant)
        turn.state = {}
    return True


def _shaped(
    rt: Runtime, turn: Turn, search: Search | None
) -> tuple[list[Message], scaffold.Writes, tuple[Ahead | None, Exception | None] | None]:
    """The shaped request, what its scaffold keeps, and recall's search on it (its result
    or its error: recall fails open on its own, the shape stands)."""
    messages, writes = shape(rt, turn)
    if search is None:
        return messages, writes, None
    try:
        return messages, writes, (search(messages), None)
    except Exception as exc:
        return messages, writes, (None, exc)


def shape(rt: Runtime, turn: Turn) -> tuple[list[Message], scaffold.Writes]:
    """The request with its scaffold, from what earlier turns stored (it only reads), and
    what the scaffold keeps once the turn is stored."""
    messages = list(turn.messages)
    if turn.session is None or not scaffold.applies(rt, turn):
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


def _store_with(rt: Runtime, turn: Turn, writes: scaffold.Writes) -> None:
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
            _scaffold_failed(rt, turn, exc)
            return


async def stored(rt: Runtime, turn: Turn) -> None:
    """Once the writes the turn queued so far are committed, or failed, or the wait gave
    up (then the turn is lost: its answer is not stored after them). Never raises."""
    if not await waits.within(
        rt, turn, "storing the turn's messages", rt.writes.settled(turn.session_of), False
    ):
        turn.lost = True


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


async def finish(rt: Runtime, turn: Turn, answer: Answer | Callable[[], Answer]) -> None:
    """Queue the assistant's answer, its usage and the turn's record to be stored (`answer`
    may be read there, off the event loop); its background work follows once it is.

    Awaited (with the turn's messages before it) when the client will not resend it
    (`Turn.answer_resent`): then the turn is durable before the client has the whole
    answer. Where another process may take the session's next turn (`Runtime.
    serves_alone`), the client's own messages are durable before it has the answer: the
    other process stores the answer from the client's resend, and this one's late write
    finds it stored. Otherwise the session's next turn in this process waits for it
    (`engine.writes`), and a crash meanwhile loses only the turn in flight, which the
    client's next request brings back."""
    if turn.counting is not None:  # for the turn's record
        await waits.within(rt, turn, "counting the request's tokens", counted(turn), None)
    read_answer = answer if callable(answer) else (lambda: answer)

    def write() -> Answer:
        got = read_answer()
        store_answer(rt, turn, got)
        return got

    if turn.answer_resent and not rt.serves_alone:
        await stored(rt, turn)
    stored_answer = storing.queue(rt, turn, write, awaited=not turn.answer_resent)
    stored_answer.add_done_callback(lambda done: _after(rt, turn, done))
    if not turn.answer_resent:
        await waits.within(rt, turn, "storing the answer", stored_answer, None)


def _after(rt: Runtime, turn: Turn, done: asyncio.Future[Answer]) -> None:
    """The turn's background work, once its answer is stored."""
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        log.warning("the answer of session %s was not stored: %r", turn.key[:8], error)
        return
    answer = done.result()
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


def store_answer(rt: Runtime, turn: Turn, answer: Answer) -> None:
    """The answer, its usage and the turn's record (`engine.turnlog`), in one commit; not
    when the client's own messages could not be stored (it would answer nothing stored)."""
    if turn.session is None or turn.lost:
        return
    _row(rt, turn)  # a new session's turn that failed before its messages were queued
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
