"""Sessions as every face shows them: one JSON shape, one way to find one from a reference.

The CLI (`memlane sessions … --json`), the admin API (`/v1/memlane/sessions/…`) and
any other face print a session with `session_json`, its texts with `session_detail`
and its messages with `message_json`, and find it with `find_session`, so a script
reads the same fields and a reference means the same session everywhere.

The lookup rule (`engine.sessions.lookup`), among the sessions the caller may
reach (its tenant's under credential tenancy, every tenant's for the operator;
for an `@@` reference, its own namespace's unless `references_across_namespaces`),
first match wins:

1. the exact id, then the exact key;
2. a unique id prefix of at least 6 characters;
3. the indexed name, case-insensitively (the caller's namespace breaks a tie);
4. a fuzzy match on names (several equally close ones are ambiguous), for reading
   only: an operation that changes or destroys a session (delete, todo, pinned,
   title, Spec Mode, compaction, indexing) passes `exact=True` and stops at step 3,
   so a retried delete or a typo never reaches a session whose title holds the words.

No match raises `NoSuchSession`; several raise `AmbiguousSession` listing them
(HTTP: 404 and 409). A reference never resolves by guessing between candidates.
"""

from __future__ import annotations

from typing import Any

from memlane.engine import scaffold
from memlane.engine.governance.compact import Compaction
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.lifecycle import session_title
from memlane.engine.sessions.lookup import (
    AmbiguousSession,
    NoSuchSession,
    SessionLookupError,
    find_session,
    session_name,
)
from memlane.files.projects import display_name
from memlane.store import Store
from memlane.types import Session, StoredMessage

OBJECT = "memlane.session"

__all__ = [
    "OBJECT",
    "AmbiguousSession",
    "NoSuchSession",
    "SessionLookupError",
    "compaction_json",
    "find_session",
    "index_cost",
    "message_json",
    "session_detail",
    "session_json",
]


def session_json(store: Store, session: Session) -> dict[str, Any]:
    """A session as scripts read it: every stored field, its title and its index name.

    `summary` is the running summary (with `summarized_count`); the index metadata
    (description, summary, tags) is in `metadata`; `tenant` is whose session it is
    (null without credential tenancy); `project` is the namespace as a person reads it.
    """
    return {
        "object": OBJECT,
        "id": session.id,
        "key": session.key,
        "namespace": session.namespace,
        "project": display_name(session.namespace),
        "tenant": session.tenant or None,
        "title": session_title(store, session),
        "name": session_name(session),
        "parent_id": session.parent_id,
        "fork_position": session.fork_position,
        "message_count": session.message_count,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "cost_usd": session.cost_usd,
        "index_cost_usd": index_cost(session),
        "summary": session.summary,
        "summarized_count": session.summarized_count,
        "metadata": dict(session.metadata),
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def session_detail(rt: Runtime, session: Session) -> dict[str, Any]:
    """`session_json` plus the session's scaffold texts (todo, pinned, anchor, spec)."""
    texts = scaffold.read_texts(rt, session)
    return session_json(rt.store, session) | {
        "todo": texts.get("todo", ""),
        "pinned": texts.get("pinned", ""),
        "anchor": texts.get("summary", ""),
        "spec_approved": bool(texts.get("spec_approved")),
    }


def index_cost(session: Session) -> float:
    """What memlane's own metadata and query calls for this session cost."""
    value = session.metadata.get("index_cost_usd", 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def message_json(item: StoredMessage) -> dict[str, Any]:
    """One stored message: its place, who wrote it, its text and tool calls."""
    message = item.message
    return {
        "id": item.id,
        "position": item.position,
        "role": message.role,
        "kind": message.kind,
        "origin": message.origin,
        "status": item.status,
        "text": message.text,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ],
        "call_id": message.call_id,
        "token_count": item.token_count,
        "created_at": item.created_at.isoformat(),
    }


def compaction_json(result: Compaction) -> dict[str, Any]:
    """What a manual compaction did: the model, messages dropped, tokens before and after."""
    return {
        "object": "memlane.compaction",
        "session_id": result.session_id,
        "model": result.model,
        "messages": result.messages,
        "dropped": result.dropped,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "snapshot": result.snapshot,
    }
