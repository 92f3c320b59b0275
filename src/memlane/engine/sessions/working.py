"""The working context of a session: a running summary plus the newest turns.

A session's transcript (user prompts and final answers) grows without bound;
what a model is given is bounded. With `summary_enabled`, once the transcript
has more than `summary_threshold` messages, one LLM call folds the oldest ones
(all but the newest `summary_keep_last`) into the session's stored running
summary and records how many messages it covers (`summarized_count`). The
working context is then a system message carrying the summary, followed by the
messages the summary does not cover.

Fallback: if the LLM fails, the stored summary is left exactly as it was and
the full transcript is returned, so a broken summariser never loses context.
This is the piece agent code with its own loop can call directly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memlane.engine import threads
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.lookup import SessionLookupError, find_session
from memlane.engine.sessions.models import usage_payload
from memlane.engine.sessions.serialize import serialize
from memlane.store import SessionNotFound
from memlane.text.llm import LLMError
from memlane.types import Message

log = logging.getLogger("memlane.sessions.working")

SUMMARY_EVENT = "session.summary"

SUMMARY_PROMPT = """\
You keep the running summary of a conversation between a user and an assistant.
You are given the current summary (possibly empty) and the next messages of the
conversation. Write the updated summary: one self-contained text that keeps
every decision, fact, preference, name, number, open question and task from
both, most important first. Write plain prose or short bullet points, no
preamble, no closing remarks. Do not invent anything."""

SUMMARY_HEADER = "Summary of the earlier conversation ({count} messages):"


@dataclass(frozen=True, slots=True)
class WorkingContext:
    """What to send the model for a session, and how it was obtained."""

    messages: list[Message]
    summary: str
    summarized_count: int
    folded: int = 0
    """Messages folded into the summary by this call (0: the summary was not touched)."""
    fallback: str | None = None
    """Why the full transcript was returned instead (the LLM failed), else None."""


def summary_message(summary: str, count: int) -> Message:
    """The system message that carries the running summary at the top of the context."""
    header = SUMMARY_HEADER.format(count=count)
    return Message(role="system", text=f"{header}\n{summary}", origin="summary")


def summary_request(summary: str, messages: list[Message]) -> list[dict[str, str]]:
    """The one LLM request that folds `messages` into `summary`."""
    current = summary.strip() or "(empty)"
    body = f"Current summary:\n{current}\n\nNext messages:\n{serialize(messages)}"
    return [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": body}]


async def working_context(rt: Runtime, session: str, *, model: str | None = None) -> WorkingContext:
    """The session's working context, summarising first when the threshold is passed.

    `session` is what a person knows it by, as the CLI takes it: its key (the
    `X-Memlane-Session` a client sent), its id, a unique id prefix or its name.
    `model` is the model of the conversation; the summary uses `summary_model`
    or `llm_model` when configured, else this one. The proxy never waits for the
    summary: it reads `current_context` and calls `fold` in the background.
    """
    session_id = await threads.to_thread(_session_id, rt, session)
    if not rt.settings.summary_enabled:
        return await threads.to_thread(current_context, rt, session_id)
    folded, fallback = await fold(rt, session_id, model=model)
    context = await threads.to_thread(current_context, rt, session_id)
    if fallback is not None:
        transcript = _transcript(rt, session_id)
        return WorkingContext(
            transcript, context.summary, context.summarized_count, fallback=fallback
        )
    return WorkingContext(
        context.messages, context.summary, context.summarized_count, folded=folded
    )


def _session_id(rt: Runtime, ref: str) -> str:
    """The id of the session `ref` names; the one query of an id or a key comes first."""
    found = rt.store.get_session(ref) or rt.store.find_session(ref)
    if found is not None:
        return found.id
    try:
        return find_session(rt.store, ref, tenant=None).id
    except SessionLookupError as exc:
        raise SessionNotFound(str(exc)) from None


def current_context(rt: Runtime, session_id: str) -> WorkingContext:
    """The stored summary plus the transcript it does not cover; no LLM call."""
    session = rt.store.get_session(session_id)
    if session is None:
        raise SessionNotFound(f"no session {session_id!r}: see `memlane sessions list`")
    transcript = _transcript(rt, session_id)
    if not rt.settings.summary_enabled:
        return WorkingContext(transcript, session.summary, session.summarized_count)
    covered = min(session.summarized_count, len(transcript))
    head = [summary_message(session.summary, covered)] if session.summary and covered else []
    return WorkingContext(head + transcript[covered:], session.summary, covered)


def _transcript(rt: Runtime, session_id: str) -> list[Message]:
    return [item.message for item in rt.store.list_messages(session_id, transcript_only=True)]


async def fold(rt: Runtime, session_id: str, *, model: str | None = None) -> tuple[int, str | None]:
    """Fold the oldest messages into the running summary once the threshold is passed.

    Returns how many messages were folded, and why nothing could be (the LLM
    failed: the stored summary is left exactly as it was), else None.
    """
    store = rt.store
    settings = rt.settings
    session = await threads.to_thread(store.get_session, session_id)
    if session is None:
        raise SessionNotFound(f"no session {session_id!r}: see `memlane sessions list`")
    transcript = await threads.to_thread(_transcript, rt, session_id)
    covered = min(session.summarized_count, len(transcript))
    target = len(transcript) - settings.summary_keep_last
    if len(transcript) <= settings.summary_threshold or target <= covered:
        return 0, None
    try:
        summary = await _fold(rt, session_id, session.summary, transcript[covered:target], model)
    except LLMError as exc:
        log.warning("session %s: summary failed (%s); using the full transcript", session_id, exc)
        await threads.to_thread(
            store.add_event, session_id, SUMMARY_EVENT, {"success": False, "error": str(exc)}
        )
        return 0, str(exc)
    await threads.to_thread(
        store.update_session, session_id, summary=summary, summarized_count=target
    )
    return target - covered, None


async def _fold(
    rt: Runtime, session_id: str, summary: str, messages: list[Message], model: str | None
) -> str:
    completion = await rt.summary_llm.complete(
        summary_request(summary, messages), model=rt.summary_model(model)
    )
    text = completion.text.strip()
    if not text:
        raise LLMError("the summary model answered nothing")
    payload = {"success": True, "folded": len(messages), **usage_payload(rt, completion)}
    await threads.to_thread(rt.store.add_event, session_id, SUMMARY_EVENT, payload)
    return text
