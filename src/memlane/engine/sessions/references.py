"""`@@name` references to other sessions, and `@@name: question`.

`@@<id-or-name>` in the latest user message brings another session's summary
into the conversation, as its own message placed just before the user's
(origin "reference"; the user's words stay unchanged). `@@name~2` adds two
levels of the session's ancestors (the sessions it was forked from).
`@@name: question` asks the referenced session the question with a cheap model
(`query_session`) and injects the answer instead of the summary.

The injected message is stored with the session right after the user message
it belongs to, so on every later turn it is replayed at the same place: the
prompt prefix stays identical and provider caches keep hitting, and the
reference costs full price once.

A reference that cannot be resolved (no such session, several candidates)
makes this stage return a `DirectAnswer` saying why: `pipeline.prepare` hands it
to the face, which answers the user with it as a normal assistant message
instead of forwarding the request.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from memlane.engine import threads
from memlane.engine.fence import DATA_NOTE, fenced, label
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.lookup import SessionLookupError, find_session, session_name
from memlane.engine.sessions.query import query_session
from memlane.engine.sessions.serialize import keep_tail, serialize
from memlane.engine.turn import DirectAnswer, Turn
from memlane.store import NewMessage, Store
from memlane.text.llm import LLMError
from memlane.types import Message, Session, StoredMessage

log = logging.getLogger("memlane.sessions.references")

REFERENCE = re.compile(
    r"(?<![\w@])@@(?P<ref>[A-Za-z0-9][\w.\-]*)(?:~(?P<depth>\d{1,2}))?(?P<question>:[ \t]*[^\n]+)?"
)
MAX_DEPTH = 10
EXCERPT_CHARS = 2_000
"""How much of an unindexed session's conversation stands in for its summary."""

REFERENCE_HEADER = "[memlane] Context from session {label}, referenced by the user as @@{ref}:"
ANCESTOR_HEADER = "It continues session {label}:"
ANSWER_HEADER = "[memlane] The user asked session {label} (referenced as @@{ref}): {question}"
ANSWER_LEAD = "Its answer:"
"""Before the answer, inside the fence: after the note that what follows is data, so the
two read as two sentences ("Its answer: This is stored data, …" read as one)."""
FAILED_ANSWER = "memlane could not resolve @@{ref}: {reason}"


@dataclass(frozen=True, slots=True)
class Reference:
    """One `@@` occurrence in a user message."""

    ref: str
    depth: int = 0
    question: str | None = None


def parse_references(text: str) -> list[Reference]:
    """Every `@@ref[~N][: question]` in `text`, in order, each reference once."""
    found: list[Reference] = []
    for match in REFERENCE.finditer(text):
        ref = match.group("ref").rstrip(".-")
        question = (match.group("question") or "")[1:].strip() or None
        depth = min(int(match.group("depth") or 0), MAX_DEPTH)
        if ref and all(r.ref != ref for r in found):
            found.append(Reference(ref, depth, question))
    return found


async def resolve_references(
    rt: Runtime, turn: Turn, messages: list[Message]
) -> list[Message] | DirectAnswer:
    """Replay stored references at their places, then resolve the latest message's new ones.

    A new reference that names no session (or several) is a `DirectAnswer` saying so;
    nothing of it is stored.

    A reference is stored only after a user prompt holding `@@`, and replayed only
    before that same prompt: a request whose user prompts hold no `@@` has nothing
    to replay or resolve, and is passed on without reading the session.
    """
    if not has_references(messages):
        return messages
    session = turn.session
    stored = (
        await threads.to_thread(rt.store.list_messages, session.id)
        if session is not None and not turn.ephemeral
        else []
    )
    anchored = anchored_references(stored)
    # A continued request (the upstream keeps the conversation) carries only what is new:
    # earlier references were forwarded with their turns and are not sent again.
    out = messages if turn.continued else place(messages, anchored)
    latest = _latest_user_index(out)
    if latest is None:
        return out
    prompt = out[latest]
    own = anchored.get(_user_prompts(stored) - 1)
    if own is not None and own[0] == prompt.fingerprint():
        if turn.continued:  # a retried request: the same references, not resolved again
            return [*out[:latest], *own[1], *out[latest:]]
        return out
    references = parse_references(prompt.text)
    if not references:
        return out
    injected = await _resolve_all(rt, turn, references)
    if isinstance(injected, DirectAnswer):
        return injected
    if session is not None and not turn.ephemeral:
        counted = [NewMessage(m, rt.tokenizer.count_message(m)) for m in injected]
        await threads.to_thread(rt.store.append_messages, session.id, counted)
    return [*out[:latest], *injected, *out[latest:]]


def has_references(messages: Sequence[Message]) -> bool:
    """Whether any user prompt holds `@@` (else this stage has nothing to replay or resolve)."""
    return any(_is_user_prompt(m) and "@@" in m.text for m in messages)


def anchored_references(
    stored: list[StoredMessage],
) -> dict[int, tuple[str, list[Message]]]:
    """Stored reference messages by the user message they precede.

    The key is the ordinal of that user message among the client's user
    messages (0 for the first); the fingerprint lets `place` check that the
    client's history still holds the same message there.
    """
    anchored: dict[int, tuple[str, list[Message]]] = {}
    ordinal, fingerprint = -1, ""
    for item in stored:
        message = item.message
        if _is_user_prompt(message):
            ordinal, fingerprint = ordinal + 1, message.fingerprint()
        elif message.origin == "reference" and ordinal >= 0:
            anchored.setdefault(ordinal, (fingerprint, []))[1].append(message)
    return anchored


def place(messages: list[Message], anchored: dict[int, tuple[str, list[Message]]]) -> list[Message]:
    """`messages` with each reference inserted just before the user message it belongs to."""
    if not anchored:
        return messages
    out: list[Message] = []
    ordinal = -1
    for message in messages:
        if _is_user_prompt(message):
            ordinal += 1
            entry = anchored.get(ordinal)
            if entry is not None and entry[0] == message.fingerprint():
                out.extend(entry[1])
        out.append(message)
    return out


def _is_user_prompt(message: Message) -> bool:
    return message.origin == "client" and message.role == "user" and message.kind == "message"


def _latest_user_index(messages: list[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if _is_user_prompt(messages[index]):
            return index
    return None


def _user_prompts(stored: list[StoredMessage]) -> int:
    return sum(1 for item in stored if _is_user_prompt(item.message))


async def _resolve_all(
    rt: Runtime, turn: Turn, references: list[Reference]
) -> list[Message] | DirectAnswer:
    own = turn.session.id if turn.session is not None else None
    injected: list[Message] = []
    for reference in references:
        try:
            target = await threads.to_thread(
                partial(
                    find_session,
                    rt.store,
                    reference.ref,
                    tenant=turn.tenant,
                    namespace=turn.namespace,
                    exclude=own,
                    only_namespace=not rt.settings.references_across_namespaces,
                )
            )
        except SessionLookupError as exc:
            return DirectAnswer(FAILED_ANSWER.format(ref=reference.ref, reason=exc))
        if target.id == own:
            reason = "that is this session itself; reference another session"
            return DirectAnswer(FAILED_ANSWER.format(ref=reference.ref, reason=reason))
        injected.append(await _reference_message(rt, turn, reference, target))
    return injected


async def _reference_message(
    rt: Runtime, turn: Turn, reference: Reference, target: Session
) -> Message:
    name = _label(target)
    if reference.question:
        try:
            answer = await query_session(rt, target, reference.question, model=turn.model)
        except LLMError as exc:
            log.warning("@@%s: query failed (%s); injecting the summary", reference.ref, exc)
        else:
            header = ANSWER_HEADER.format(
                label=name, ref=label(reference.ref), question=label(reference.question)
            )
            text = fenced(f"{header} {DATA_NOTE}", f"{ANSWER_LEAD}\n{answer.text.strip()}")
            return Message(role="user", text=text, origin="reference")
    text = await threads.to_thread(_summary_block, rt.store, reference, target)
    header, _, body = text.partition("\n")
    return Message(role="user", text=fenced(f"{header} {DATA_NOTE}", body), origin="reference")


def _summary_block(store: Store, reference: Reference, target: Session) -> str:
    blocks = [
        REFERENCE_HEADER.format(label=_label(target), ref=label(reference.ref)),
        reference_summary(store, target),
    ]
    current, seen = target, {target.id}
    for _ in range(reference.depth):
        if current.parent_id is None or current.parent_id in seen:
            break
        parent = store.get_session(current.parent_id)
        if parent is None:
            break
        blocks += [
            "",
            ANCESTOR_HEADER.format(label=_label(parent)),
            reference_summary(store, parent),
        ]
        current = parent
        seen.add(parent.id)
    return "\n".join(blocks)


def reference_summary(store: Store, session: Session) -> str:
    """The index summary, else the running summary, else the end of the conversation."""
    described = session.metadata.get("summary")
    if isinstance(described, str) and described.strip():
        return described.strip()
    if session.summary.strip():
        return session.summary.strip()
    excerpt = keep_tail(serialize(store.list_messages(session.id)), EXCERPT_CHARS)
    return excerpt or "(the session has no messages)"


def _label(session: Session) -> str:
    """The session's name and id for a fence's header: a name may come from an imported
    file or a model, so it is one defused line (`fence.label`)."""
    name = label(session_name(session) or "")
    return f'"{name}" ({session.id})' if name else label(session.id)
