"""Order the stages of a turn. See `engine.turn` for the picture."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from memlane.engine import failopen, scaffold, storing, threads, turn_store, waits
from memlane.engine.failopen import best_effort
from memlane.engine.governance import counted, govern_turn
from memlane.engine.memory.ingest import schedule_ingest
from memlane.engine.memory.recall import Ahead, recall_for_turn, search_ahead
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import history
from memlane.engine.sessions.ahead import made_session
from memlane.engine.sessions.indexing import schedule_index
from memlane.engine.sessions.references import has_references, resolve_references
from memlane.engine.turn import Answer, DirectAnswer, Forward, Prepared, Turn
from memlane.store import StoreError
from memlane.types import Message

log = logging.getLogger("memlane.pipeline")

P = ParamSpec("P")
T = TypeVar("T")


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
    with waits.spending(turn):
        settled = await rt.writes.before_reading(turn.session_of, waits.left(rt, turn))
    if not settled:
        waits.overran(rt, turn, "storing the session's earlier turns")
    turn.clock.mark("wait")
    ahead = None
    if has_references(turn.messages):
        stored_now = storing.queue(
            rt, turn, lambda: turn_store.stored_incoming(rt, turn), messages=True, awaited=True
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
    governing = govern_turn(rt, turn, messages)
    if not reads_on_the_loop(rt):  # its reads go to a worker thread: bounded by the wait
        governing = waits.within(rt, turn, "governing the request", governing, messages)
    messages = await best_effort(rt, turn, "governance", governing, messages)
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
            rt, turn, lambda: turn_store.store_and_scaffold(rt, turn), messages=True, awaited=True
        )
        messages = await waits.within(rt, turn, "storing and shaping the request", stored, None)
        if messages is None:  # forwarded as sent; its answer is not stored after it
            turn.lost = True
            return list(turn.messages), None
        return messages, (None if search is None else _settled_read(rt, search, messages))
    found: Shaped | _Late | None = await _unless_unreadable(
        rt, turn, read_within(rt, turn, READING, LATE, _found_and_shaped, rt, turn, search)
    )
    shaped = found if found is not None else await _subagent_shaped(rt, turn, search)
    if shaped is LATE:  # forwarded as sent, stored from the client's next request
        turn.lost = True
        return list(turn.messages), None
    messages, writes, ahead = shaped
    storing.queue(
        rt, turn, lambda: turn_store.store_with(rt, turn, writes), messages=True, linger=True
    )
    return messages, (None if ahead is None else _outcome(*ahead))


READING = "reading and shaping the request"


async def _unless_unreadable(
    rt: Runtime, turn: Turn, reading: Awaitable[Shaped | _Late | None]
) -> Shaped | _Late | None:
    """The read's result, or LATE when the store cannot be read (a database gone away):
    the request is forwarded as sent, like one whose read outlasted its wait, and the
    failure logged and recorded; memory never breaks a request."""
    try:
        return await reading
    except StoreError as exc:
        await failopen.record(rt, turn, "store", f"{READING}: {exc}", type(exc).__name__)
        return LATE


async def _subagent_shaped(rt: Runtime, turn: Turn, search: Search | None) -> Shaped | _Late:
    """A subagent's first call, shaped once its session, a fork of its parent's, is open."""
    opened = storing.queue(rt, turn, lambda: turn_store.open_session_of(rt, turn), awaited=True)
    turn.session = await waits.within(rt, turn, "opening the subagent's session", opened, None)
    if turn.session is None:
        return LATE
    return await read_within(rt, turn, "shaping the request", LATE, _shaped, rt, turn, search)


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


class _Late(enum.Enum):
    LATE = "late"


LATE = _Late.LATE
"""What a read for the request gives when its wait ran out."""

Shaped = tuple[list[Message], scaffold.Writes, tuple[Ahead | None, Exception | None] | None]
"""The shaped request, what its scaffold keeps, and recall's search on it (its result or
its error: recall fails open on its own, the shape stands)."""


def _found_and_shaped(rt: Runtime, turn: Turn, search: Search | None) -> Shaped | None:
    """The turn's session and its state read, then the request shaped from them, in one
    read: where reads go to a worker thread (PostgreSQL), one trip there and back, not
    two. None for a subagent's first call: its session is opened under its parent's
    before it is shaped (`_shape`)."""
    _found(rt, turn)
    if turn.session is None:
        return None
    return _shaped(rt, turn, search)


def _found(rt: Runtime, turn: Turn) -> None:
    """The turn's session and its state, read; a new one made in memory, its row written
    first among the turn's writes (`turn_store.store_with`). A subagent's new session is
    left to be opened under its parent's."""
    found = rt.store.find_session_state(turn.key, tenant=turn.tenant)
    if found is not None:
        turn.session, turn.state = found
    elif turn.parent_key is None:
        turn.session = turn.made_ahead = made_session(turn.key, turn.namespace, turn.tenant)
        turn.state = {}


def _shaped(rt: Runtime, turn: Turn, search: Search | None) -> Shaped:
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
        turn_store.scaffold_failed(rt, turn, exc)
        return messages, []


async def stored(rt: Runtime, turn: Turn) -> None:
    """Once the writes the turn queued so far are committed, or failed, or the wait gave
    up (then the turn is lost: its answer is not stored after them). Never raises."""
    if not await waits.within(
        rt, turn, "storing the turn's messages", rt.writes.settled(turn.session_of), False
    ):
        turn.lost = True


def finish_after_sending(rt: Runtime, turn: Turn) -> bool:
    """Whether a whole (not streamed) answer is queued to be stored once its last byte is
    handed on, not just before: the client resends it with its next request and this
    process takes that request (`Runtime.serves_alone`), so nothing waits for its store.
    Queued before the answer went out, the store's writer woke as it was being sent and
    took the GIL from the event loop in the middle of the send (`next_turn_ab.py
    --growing`, two runs: the next turn's added p50 0.3-0.4 ms lower, its p90 0.4-0.9).
    What `ready_to_finish` waits for is done before the answer goes out, and
    `queue_answer` never suspends: the answer is queued before the loop reads anything
    else, so before the client's next request (or its read of the session) can be."""
    return turn.answer_resent and rt.serves_alone


async def finish(rt: Runtime, turn: Turn, answer: Answer | Callable[[], Answer]) -> None:
    """Queue the assistant's answer, its usage and the turn's record to be stored (`answer`
    may be read there, off the event loop); its background work follows once it is.

    Awaited (with the turn's messages before it) when the client will not resend it
    (`Turn.answer_resent`): then the turn is durable before the client has the whole
    answer. Where another process may take the session's next turn (`Runtime.
    serves_alone`), the client's own messages are durable before it has the answer: the
    other process stores the answer from the client's resend, and this one's late write
    finds it stored. Otherwise the client does not wait for it, nor does the session's
    next turn while the writer has nothing else to do: that turn carries the answer and
    reads nothing its write changes, and its own writes are queued behind it
    (`Writes.before_reading`). A crash meanwhile loses only the turn in flight, which the
    client's next request brings back."""
    await ready_to_finish(rt, turn)
    stored_answer = queue_answer(rt, turn, answer)
    if not turn.answer_resent:
        await waits.within(rt, turn, "storing the answer", stored_answer, None)


async def ready_to_finish(rt: Runtime, turn: Turn) -> None:
    """What the answer's store waits for (`finish`): the request's token counts, for the
    turn's record, and where another process may take the session's next turn, the
    client's own messages stored. Never raises."""
    await counts_in(rt, turn)
    if turn.answer_resent and not rt.serves_alone:
        await stored(rt, turn)


async def counts_in(rt: Runtime, turn: Turn) -> None:
    """Once the request's token counts are in (`Turn.context`), within the request's wait.
    A count already in (made while the request was upstream, as it is behind an upstream
    that takes its time) is not awaited: that made a task and a timed wait and gave the
    loop two turns, in front of the answer. Never raises."""
    if turn.counting is not None and not turn.counting.finished:
        await waits.within(rt, turn, "counting the request's tokens", counted(turn), None)


def queue_answer(
    rt: Runtime, turn: Turn, answer: Answer | Callable[[], Answer]
) -> asyncio.Future[Answer]:
    """Queue the answer's store (once `ready_to_finish`); its background work follows."""
    read_answer = answer if callable(answer) else (lambda: answer)

    def write() -> Answer:
        got = read_answer()
        turn_store.store_answer(rt, turn, got)
        return got

    resent = turn.answer_resent
    stored_answer = storing.queue(rt, turn, write, awaited=not resent, read_next=not resent)
    stored_answer.add_done_callback(lambda done: _after(rt, turn, done))
    return stored_answer


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
