"""The memory work of answered turns, found again in the store.

Every stored turn at or past its session's mark (`engine.memory.marks`) whose answer
is stored (the client was answered) still has memory work to do. Its work is
re-derived from the stored messages (the user's message, the assistant's answer), as
the live path would have queued it: at start-up for the turns a stop or a crash left
unremembered (`engine.memory.resume`), and while running for the turns the background
queue kept as their session's key only, past its bound (`ingest`, `turn_input.Reread`).
A turn whose entries were written before a stop keeps them (`TurnInput.entry_ids`,
`answer_entry_ids`): only what is missing is done. Work re-derived this way runs with
the configured credentials, or those of the request whose job runs it (a client's
lent key lives in memory only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from memlane.engine.memory import marks
from memlane.engine.memory.turn_input import ANSWER_AFTER, TurnInput, within_ceiling
from memlane.engine.runtime import Runtime
from memlane.text.redact import redact
from memlane.types import Session, StoredMessage


def pending_turns(rt: Runtime, before: datetime | None = None) -> list[TurnInput]:
    """The turns past their session's mark, oldest first per session (asked `before`
    that moment, when given)."""
    states: dict[str, dict[str, str]] = {}
    for row in rt.store.dump("session_state"):
        if row.get("name") in (marks.MARK, marks.DONE):
            state = states.setdefault(str(row["session_id"]), {})
            state[str(row["name"])] = str(row.get("value"))
    found: list[TurnInput] = []
    for session_id, state in states.items():
        found.extend(session_turns(rt, session_id, state, before))
    return found


def session_turns(
    rt: Runtime, session_id: str, state: dict[str, str], before: datetime | None = None
) -> list[TurnInput]:
    """One session's answered turns at or past its mark, oldest first, but those already
    remembered past it (`marks.DONE`); none when it has no mark (`state`: the session's
    state as read)."""
    store = rt.store
    mark = marks.read(state)
    session = store.get_session(session_id)
    if mark is None or session is None:
        return []
    done = marks.read_done(state)
    messages = store.list_messages(session_id, since_position=mark)
    turns = [
        turn
        for turn in _answered_turns(rt, session, messages)
        if turn.user_position not in done
        and (before is None or turn.said_at is None or turn.said_at < before)
    ]
    if turns and rt.settings.memory_store_turns:
        turns = _with_written_entries(rt, session_id, turns)
    return turns


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


def answered_positions(rt: Runtime, session_id: str, mark: int) -> list[int]:
    """The positions of the session's answered turns at or past `mark`, ascending (what
    `marks.record_done` moves the mark over)."""
    session = rt.store.get_session(session_id)
    if session is None:
        return []
    messages = rt.store.list_messages(session_id, since_position=mark)
    return [
        turn.user_position
        for turn in _answered_turns(rt, session, messages)
        if turn.user_position is not None
    ]
