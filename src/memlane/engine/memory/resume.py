"""At start-up, queue again the memory work a stop or a crash left undone.

Every stored turn at or past its session's mark (`engine.memory.marks`) whose answer
is stored (the client was answered) is re-derived from the stored messages (the user's
message, the assistant's answer) and queued like a finished turn
(`ingest.queue`); its batch's job moves the mark on. A turn whose entries were
written before the stop keeps them (`TurnInput.entry_ids`, `answer_entry_ids`): only
what is missing is done, once the start-up catch-up has indexed the entries a stop left
in their files alone. Work resumed this way runs with the configured credentials (a
client's lent key lives in memory only).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from memlane.engine import threads
from memlane.engine.memory import marks
from memlane.engine.memory.ingest import ANSWER_AFTER, TurnInput, queue, within_ceiling
from memlane.engine.runtime import Runtime
from memlane.text.redact import redact
from memlane.types import Session, StoredMessage

log = logging.getLogger("memlane.memory")


async def resume(rt: Runtime, *, before: datetime | None = None) -> int:
    """Queue the memory work of every stored turn not remembered yet; how many turns.
    Once per home (the primary process). `before`: when this process started; a turn
    it stored since is remembered by its own request (`pipeline.finish`), and resuming
    it too would do its work twice."""
    if not marks.wanted(rt.settings) or not rt.primary:
        return 0
    # Entries a stop left in their files alone are indexed by the start-up catch-up:
    # read before it, their turns would look unwritten and be written twice.
    await rt.memory_book.ready()
    items = await threads.to_thread(pending_turns, rt, before)
    for item in items:
        queue(rt, item)
    if items:
        sessions = len({item.session_id for item in items})
        log.info("resumed the memory work of %d turn(s) in %d session(s)", len(items), sessions)
    return len(items)


def pending_turns(rt: Runtime, before: datetime | None = None) -> list[TurnInput]:
    """The turns past their session's mark, oldest first per session (asked `before`
    that moment, when given)."""
    store = rt.store
    found: list[TurnInput] = []
    for row in store.dump("session_state"):
        if row.get("name") != marks.MARK:
            continue
        session_id = str(row["session_id"])
        mark = marks.read({marks.MARK: str(row.get("value"))})
        session = store.get_session(session_id)
        if mark is None or session is None:
            continue
        messages = store.list_messages(session_id, since_position=mark)
        turns = [
            turn
            for turn in _answered_turns(rt, session, messages)
            if before is None or turn.said_at is None or turn.said_at < before
        ]
        if turns and rt.settings.memory_store_turns:
            turns = _with_written_entries(rt, session_id, turns)
        found.extend(turns)
    return found


def _answered_turns(
    rt: Runtime, session: Session, messages: list[StoredMessage]
) -> Iterable[TurnInput]:
    """Each user message with the assistant's answer stored after it (a turn whose client
    was answered); a failed turn or one still waiting for its answer is left out."""
    user: StoredMessage | None = None
    answers: list[str] = []
    for stored in [*messages, None]:
        message = stored.message if stored is not None else None
        if message is not None and message.role == "assistant":
            if message.kind == "message" and message.text.strip():
                answers.append(message.text)
            continue
        if message is not None and not (message.role == "user" and message.kind == "message"):
            continue  # tool results and the like belong to the turn under way
        if user is not None and answers:
            yield _turn(rt, session, user, "\n\n".join(answers))
        user = stored if stored is not None and stored.status == "ok" else None
        answers = []


def _turn(rt: Runtime, session: Session, user: StoredMessage, answer: str) -> TurnInput:
    model = session.metadata.get("model")
    item = TurnInput(
        session_id=session.id,
        namespace=session.namespace,
        model=rt.memory_model(model if isinstance(model, str) else None),
        tenant=session.tenant,
        user_text=user.message.text,
        user_message_id=user.id,
        assistant_text=answer,
        said_at=user.created_at,
        user_position=user.position,
    )
    return within_ceiling(item, rt.settings.memory_message_chars)


def _with_written_entries(rt: Runtime, session_id: str, turns: list[TurnInput]) -> list[TurnInput]:
    """The turns, each with the entries already written for it: the user's, found by its
    message, and the answer's, by its text dated `ANSWER_AFTER` past the user's message
    (a stop may come between the two writes; messages stored together share a time)."""
    users: dict[int, list[str]] = {}
    answers: dict[tuple[datetime, str], list[str]] = {}
    for entry in rt.store.list_facts(
        conversation_id=session_id, roles=("user", "assistant"), include_deleted=True
    ):
        if entry.role == "user" and entry.source_message is not None:
            users.setdefault(entry.source_message, []).append(entry.id)
        elif entry.role == "assistant":
            answers.setdefault((entry.created_at, entry.text), []).append(entry.id)
    out: list[TurnInput] = []
    for turn in turns:
        user = users.get(turn.user_message_id, []) if turn.user_message_id is not None else []
        answer: list[str] = []
        if turn.said_at is not None:  # the entry holds the answer as written: redacted
            answer = answers.get((turn.said_at + ANSWER_AFTER, redact(turn.assistant_text)), [])
        out.append(replace(turn, entry_ids=tuple(user), answer_entry_ids=tuple(answer)))
    return out
