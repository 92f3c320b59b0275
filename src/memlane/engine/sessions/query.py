"""`query_session`: answer a question about a past session with a cheap model.

The model reads the session's stored summaries (its index summary and its
running summary) and as much of the conversation as fits in
`query_max_input_chars`, most recent first, and answers the question from
that alone. Each call is recorded as a `session.query` event on the session
that was asked about, with usage and cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.engine import threads
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.models import cost_usd, index_model, usage_payload
from memlane.engine.sessions.serialize import keep_tail, serialize
from memlane.types import Session

QUERY_EVENT = "session.query"

QUERY_PROMPT = """\
You answer questions about a past conversation between a user and an assistant.
You are given what is known about it (stored summaries, then the conversation,
possibly cut at the start) and one question. Answer the question briefly and
precisely from this material only. If the material does not answer it, say so
in one sentence; never guess."""


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    text: str
    model: str
    cost_usd: float


def stored_summaries(session: Session) -> str:
    """The summaries memlane keeps for a session, labelled, or an empty string."""
    parts: list[str] = []
    described = session.metadata.get("summary")
    if isinstance(described, str) and described:
        parts.append(f"Index summary:\n{described}")
    if session.summary:
        parts.append(
            f"Running summary of the first {session.summarized_count} messages:\n{session.summary}"
        )
    return "\n\n".join(parts)


def query_material(rt: Runtime, session: Session) -> str:
    """Summaries first, then the conversation's most recent part, within the configured cap."""
    summaries = stored_summaries(session)
    budget = max(1_000, rt.settings.query_max_input_chars - len(summaries))
    conversation = keep_tail(serialize(rt.store.list_messages(session.id)), budget)
    blocks = [summaries] if summaries else []
    blocks.append(f"Conversation:\n{conversation or '(no messages)'}")
    return "\n\n".join(blocks)


async def query_session(
    rt: Runtime, session: Session, question: str, *, model: str | None = None
) -> SessionAnswer:
    """The cheap model's answer to `question` about `session`. Raises LLMError on failure."""
    material = await threads.to_thread(query_material, rt, session)
    request = [
        {"role": "system", "content": QUERY_PROMPT},
        {"role": "user", "content": f"{material}\n\nQuestion: {question.strip()}"},
    ]
    chosen = index_model(rt, model, session)
    completion = await rt.summary_llm.complete(request, model=chosen)
    payload = {"question": question, "answer": completion.text, **usage_payload(rt, completion)}
    await threads.to_thread(rt.store.add_event, session.id, QUERY_EVENT, payload)
    return SessionAnswer(completion.text.strip(), completion.model, cost_usd(rt, completion))
