"""Session metadata (name, description, summary, tags), generated in the background.

After a turn, once at least `index_min_new_user_messages` user messages arrived
since the last indexed message, a cheap model reads the conversation (user and
assistant text only, the most recent `index_max_input_chars`) and answers one
JSON object. The answer must parse and pass the `SessionMeta` schema; a
malformed answer is retried with the error shown to the model (3 attempts in
all); a transport error is not retried (the next turn tries again). Every
attempt is recorded as a `session.index` event with its usage and cost.

The result is stored twice: in the store (the session's metadata, which `@@`
references and `memlane sessions list` read) and atomically as `meta.json` in
the session folder, for people. An invalid index configuration disables
indexing with a warning at start-up; the proxy keeps serving.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.background import session_policy
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.generated_names import generated_name
from memlane.engine.sessions.lifecycle import ensure_title
from memlane.engine.sessions.metafile import meta_path, read_meta, write_meta
from memlane.engine.sessions.models import cost_usd, index_model, usage_payload
from memlane.engine.sessions.serialize import is_conversation, keep_tail, serialize
from memlane.engine.turn import Turn
from memlane.files.locks import INDEX_LOCKS, HomeLock
from memlane.store import SessionNotFound
from memlane.store.documents import NAME_NUMBERED
from memlane.text.llm import Completion, LLMError
from memlane.text.redact import redact_fields
from memlane.types import MessageText, Session

log = logging.getLogger("memlane.sessions.index")

INDEX_EVENT = "session.index"
MAX_ATTEMPTS = 3
"""One try plus two retries of a malformed answer; transport errors are never retried."""
MAX_NAME_CHARS = 48
MAX_TAGS = 8

INDEX_PROMPT = """\
You index conversations between a user and an assistant so they can be found
and referenced later. Read the conversation and answer with ONE JSON object,
nothing before or after it, with exactly these keys:

  "name":        a short lowercase slug naming the topic, 2-5 words joined by
                 hyphens, e.g. "confirm-button-refactor"
  "description": one sentence saying what the session is about
  "summary":     a dense paragraph of what was asked, decided and done, with the
                 names, numbers and open questions someone resuming it needs
  "tags":        1-8 short lowercase keywords

Use only what the conversation says."""

PARENT_NOTE = "This session continues (was forked from) a session summarised as:\n{summary}"
RETRY_NOTE = "That answer was not usable: {error}. Answer again with only the JSON object."

_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def slugify(text: str, *, limit: int = MAX_NAME_CHARS) -> str:
    """Lowercase words joined by hyphens, at most `limit` characters, cut at a word."""
    slug = _SLUG_UNSAFE.sub("-", text.lower()).strip("-")
    if len(slug) > limit:
        slug = slug[:limit].rsplit("-", 1)[0] if "-" in slug[:limit] else slug[:limit]
    return slug


class SessionMeta(BaseModel):
    """The schema an index answer must satisfy; names and tags are normalised to slugs."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1, max_length=500)
    summary: str = Field(min_length=1, max_length=8_000)
    tags: list[str] = Field(default_factory=list, max_length=32)

    @field_validator("name")
    @classmethod
    def _name_is_slug(cls, value: str) -> str:
        slug = slugify(value)
        if not slug:
            raise ValueError("name must contain letters or digits")
        return slug

    @field_validator("tags")
    @classmethod
    def _tags_are_slugs(cls, value: list[str]) -> list[str]:
        tags: list[str] = []
        for tag in value:
            slug = slugify(tag, limit=32)
            if slug and slug not in tags:
                tags.append(slug)
        return tags[:MAX_TAGS]


class MalformedMetadata(ValueError):
    """The model's answer is not one JSON object matching `SessionMeta`."""


def parse_metadata(text: str) -> SessionMeta:
    """Parse an index answer; a fenced ```json block is accepted, anything else must be JSON."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedMetadata(f"not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise MalformedMetadata("not a JSON object")
    try:
        return SessionMeta.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"field {'.'.join(str(p) for p in error['loc']) or 'object'!r}: {error['msg']}"
            for error in exc.errors()
        ]
        raise MalformedMetadata("; ".join(problems)) from None


# --- configuration --------------------------------------------------------------


class IndexConfig(BaseModel):
    """The index knobs, validated on their own so a bad value disables only indexing."""

    model_config = ConfigDict(frozen=True)

    min_new_user_messages: int = Field(ge=1)
    max_input_chars: int = Field(ge=1_000)


def index_config_problem(settings: Settings) -> str | None:
    """Why indexing cannot run with these settings, or None when it can."""
    try:
        _config(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = f"MEMLANE_INDEX_{str(first['loc'][0]).upper()}"
        return f"session indexing is disabled: invalid {key} ({first['msg']})"
    return None


def startup_warnings(settings: Settings) -> list[str]:
    """What a face should print when it starts (an invalid index configuration)."""
    if not settings.index_enabled:
        return []
    problem = index_config_problem(settings)
    return [problem] if problem else []


def _config(settings: Settings) -> IndexConfig:
    return IndexConfig(
        min_new_user_messages=settings.index_min_new_user_messages,
        max_input_chars=settings.index_max_input_chars,
    )


# --- scheduling -----------------------------------------------------------------


def schedule_index(rt: Runtime, turn: Turn) -> None:
    """After a stored turn, in the background: record the title, index when enough is new.

    A session's turns are batched (`Background.batch`, `background.session_policy`): the
    check runs once per quiet period or batch of turns, not after every turn, and never
    twice at once for a session."""
    session = turn.session
    if turn.ephemeral or session is None:
        return
    indexing = rt.settings.index_enabled and index_config_problem(rt.settings) is None
    if not indexing and session.title:
        return
    key = f"index {session.id}"
    run = functools.partial(_after_turns, rt, session.id, indexing=indexing)
    policy = session_policy(rt.settings)
    # past the queue's bound the key alone waits: its job reads what is new from the store
    rt.background.batch(key, turn.model, run, policy, name=key, stand_in=turn.model)


async def _after_turns(rt: Runtime, session_id: str, models: list[str], *, indexing: bool) -> None:
    """Whether it is due is decided under the session's index lock: another process
    (a worker of the same proxy) that indexed it meanwhile leaves nothing to do. The
    latest turn's model is the one used."""
    lock = HomeLock.striped(rt.settings.home_path, INDEX_LOCKS, session_id)
    async with lock.hold():
        due = await threads.to_thread(_title_and_due, rt, session_id, indexing=indexing)
        if due is not None:
            await index_session(rt, session_id, model=models[-1], loaded=due)


def _title_and_due(
    rt: Runtime, session_id: str, *, indexing: bool
) -> tuple[Session, list[MessageText]] | None:
    """Record the title if missing; when enough is new to index, the session and its
    messages (one thread hop), else None.

    Only the user's messages after the last indexed one are read to decide (an agent's
    session holds hundreds of tool results between two prompts), and, when it is due,
    only the latest messages the prompt can hold (`conversation_tail`): reading the whole
    session after every batch of turns made it O(session length). Of each message only
    its words are read (`Store.list_message_texts`): decoding every stored message
    (its raw wire form included) cost most of an index job's reads.
    """
    session = rt.store.get_session(session_id)
    if session is None:
        return None
    if not session.title:
        ensure_title(rt.store, session)
    if not indexing:
        return None
    since = last_indexed_position(session)
    prompts = rt.store.list_message_texts(session_id, since_position=since + 1, roles=("user",))
    config = _config(rt.settings)
    if new_user_messages(prompts, since) < config.min_new_user_messages:
        return None
    latest = prompts[-1].position
    return session, conversation_tail(rt, session_id, latest, config.max_input_chars)


TAIL_STEP = 64
"""Positions a conversation's tail is first read back from its latest user message; each
further read goes back twice as far as the one before."""


def conversation_tail(
    rt: Runtime, session_id: str, latest: int, max_chars: int
) -> list[MessageText]:
    """The session's latest messages, as many as `keep_tail(serialize(...), max_chars)`
    needs to give what it gives for the whole session: every message from the first whose
    text, with what follows it, is longer than `max_chars` (else all of them), read back
    from position `latest` (the first read runs to the session's end).

    Read backwards, each step the positions before the last: a long session costs its
    prompt's worth of rows, not all of its rows, each time it is indexed."""
    span = TAIL_STEP
    start = max(0, latest + 1 - span)
    stored = rt.store.list_message_texts(session_id, since_position=start)
    while start > 0 and len(serialize(stored)) <= max_chars:
        span *= 2
        end, start = start, max(0, start - span)
        stored = [
            *rt.store.list_message_texts(session_id, since_position=start, before_position=end),
            *stored,
        ]
    return stored


def last_indexed_position(session: Session) -> int:
    value = session.metadata.get("last_indexed_position")
    return value if isinstance(value, int) else -1


def new_user_messages(stored: list[MessageText], since_position: int) -> int:
    """User prompts stored after `since_position` (memlane's own items do not count)."""
    return sum(
        1
        for item in stored
        if item.position > since_position and item.role == "user" and is_conversation(item)
    )


# --- generation -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexResult:
    ok: bool
    attempts: int
    meta: SessionMeta | None = None
    error: str | None = None
    cost_usd: float = 0.0


async def index_session(
    rt: Runtime,
    session_id: str,
    *,
    model: str | None = None,
    loaded: tuple[Session, list[MessageText]] | None = None,
) -> IndexResult:
    """Generate and store the session's metadata now (what `memlane sessions index` runs);
    `loaded`: the session and its messages, already read."""
    problem = index_config_problem(rt.settings)
    if problem is not None:
        return IndexResult(ok=False, attempts=0, error=problem)
    store = rt.store
    if loaded is None:
        found = await threads.to_thread(store.get_session, session_id)
        if found is None:
            raise SessionNotFound(f"no session {session_id!r}: see `memlane sessions list`")
        loaded = found, await threads.to_thread(store.list_message_texts, session_id)
    session, stored = loaded
    conversation = keep_tail(serialize(stored), _config(rt.settings).max_input_chars)
    if not conversation:
        return IndexResult(ok=False, attempts=0, error="the session has no conversation to index")
    request = await _request(rt, session, conversation)
    llm, chosen = rt.summary_llm, index_model(rt, model, session)
    spent = 0.0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            completion = await llm.complete(request, model=chosen, json_mode=True)
        except LLMError as exc:
            await _record(rt, session_id, attempt, None, error=str(exc))
            return IndexResult(ok=False, attempts=attempt, error=str(exc), cost_usd=spent)
        spent += cost_usd(rt, completion)
        try:
            meta = parse_metadata(completion.text)
        except MalformedMetadata as exc:
            await _record(rt, session_id, attempt, completion, error=str(exc))
            request = [
                *request,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": RETRY_NOTE.format(error=exc)},
            ]
            continue
        payload = _payload(rt, attempt, completion, error=None)
        saved = await threads.to_thread(
            _save, rt, session_id, meta, completion.model, stored, spent, payload
        )
        return IndexResult(ok=True, attempts=attempt, meta=saved, cost_usd=spent)
    error = f"the index model gave no usable answer in {MAX_ATTEMPTS} attempts"
    log.warning("session %s: %s", session_id, error)
    return IndexResult(ok=False, attempts=MAX_ATTEMPTS, error=error, cost_usd=spent)


async def _request(rt: Runtime, session: Session, conversation: str) -> list[dict[str, str]]:
    parts = [f"Conversation:\n{conversation}"]
    if session.parent_id:
        parent = await threads.to_thread(rt.store.get_session, session.parent_id)
        parent_summary = str(parent.metadata.get("summary") or parent.summary) if parent else ""
        if parent_summary:
            parts.insert(0, PARENT_NOTE.format(summary=parent_summary))
    return [
        {"role": "system", "content": INDEX_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _payload(
    rt: Runtime, attempt: int, completion: Completion | None, *, error: str | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"success": error is None, "attempt": attempt}
    if completion is not None:
        payload.update(usage_payload(rt, completion))
    if error is not None:
        payload["error"] = error
    return payload


async def _record(
    rt: Runtime, session_id: str, attempt: int, completion: Completion | None, *, error: str | None
) -> None:
    payload = _payload(rt, attempt, completion, error=error)
    await threads.to_thread(rt.store.add_event, session_id, INDEX_EVENT, payload)


def _save(
    rt: Runtime,
    session_id: str,
    meta: SessionMeta,
    model: str,
    stored: list[MessageText],
    cost: float,
    event: dict[str, Any],
) -> SessionMeta:
    """The successful attempt's event, then the metadata (one thread hop, one commit);
    returns what was stored, its name as `generated_names.generated_name` chose it (a
    person's stays; one another session of the namespace shows becomes `<name>-N`)."""
    store = rt.store
    now = datetime.now(UTC).isoformat(timespec="seconds")
    last = stored[-1].position if stored else -1
    fields = redact_fields(meta.model_dump())  # what the model wrote may quote a credential
    before = store.get_session(session_id)
    if before is None:  # deleted while the model was thinking
        return meta
    fields["name"], numbered = generated_name(store, before, fields["name"])  # no lock held
    with store.transaction():
        store.add_event(session_id, INDEX_EVENT, event)
        session = store.get_session(session_id)
        if session is None:  # deleted while the model was thinking
            return meta
        metadata = {
            **session.metadata,
            **fields,
            "indexed_model": model,
            "indexed_at": now,
            "last_indexed_position": last,
            "index_cost_usd": round(float(session.metadata.get("index_cost_usd", 0.0)) + cost, 8),
            NAME_NUMBERED: numbered,
        }
        if not numbered:
            del metadata[NAME_NUMBERED]
        store.update_session(session_id, metadata=metadata)
    path = meta_path(rt.settings.sessions_path, session.key, session.tenant)
    read_meta(path)  # a corrupt file is reported (warning) before it is replaced
    write_meta(
        path,
        {
            "session_id": session.id,
            "key": session.key,
            "namespace": session.namespace,
            "parent_session_id": session.parent_id,
            **fields,
            "created_at": session.created_at.isoformat(timespec="seconds"),
            "updated_at": now,
            "model": model,
            "last_indexed_position": last,
        },
    )
    return meta.model_copy(update={"name": fields["name"]})
