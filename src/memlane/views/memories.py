"""Memories as every face shows them: one JSON shape, one way to find one from a reference.

A memory is named by its full id or by a unique prefix of at least 6 characters
(`engine.memory.manage.get_memory`); no match, a shorter prefix or several matches
raise `MemoryNotFound` with a message that says what to type instead.
"""

from __future__ import annotations

from typing import Any

from memlane.engine.memory.extract import PROJECT, USER
from memlane.engine.memory.manage import MemoryNotFound, get_memory
from memlane.engine.memory.scopes import CONVERSATION_PREFIX, GLOBAL, NAMESPACE_PREFIX, unqualified
from memlane.types import Fact

OBJECT = "memlane.memory"

__all__ = ["OBJECT", "MemoryNotFound", "about", "get_memory", "memory_json", "where"]


def about(scope: str) -> tuple[str, str | None]:
    """Whom a memory of `scope` is about, and where: (`user`, None) for the tenant's global
    scope (recalled in every session), (`project`, the namespace) for a project's, and
    (`conversation`, the session id) for one conversation's."""
    inner = unqualified(scope)
    if inner == GLOBAL:
        return USER, None
    if inner.startswith(NAMESPACE_PREFIX):
        return PROJECT, inner.removeprefix(NAMESPACE_PREFIX)
    return "conversation", inner.removeprefix(CONVERSATION_PREFIX)


def where(scope: str) -> str:
    """`about` in words, for a table: `user`, `project api`, `conversation 3f2a…`."""
    kind, name = about(scope)
    return kind if name is None else f"{kind} {name}"


def memory_json(fact: Fact, score: float | None = None) -> dict[str, Any]:
    """A memory with its provenance and when it was true (`valid_to` None: still true);
    `score` when it comes from a search. `about`: `user` (the tenant's global scope, recalled
    everywhere), `project` (in `namespace`) or `conversation`."""
    kind, name = about(fact.scope)
    out: dict[str, Any] = {
        "object": OBJECT,
        "id": fact.id,
        "scope": fact.scope,
        "about": kind,
        "namespace": name if kind == PROJECT else None,
        "role": fact.role,
        "text": fact.text,
        "conversation_id": fact.conversation_id,
        "created_at": fact.created_at.isoformat(),
        "updated_at": fact.updated_at.isoformat(),
        "deleted": fact.deleted,
        "valid_from": fact.since.isoformat(),
        "valid_to": fact.valid_to.isoformat() if fact.valid_to else None,
        "replaced_by": fact.replaced_by,
        "supersedes": fact.supersedes,
        "source_session": fact.source_session,
        "source_message": fact.source_message,
    }
    if score is not None:
        out["score"] = round(score, 4)
    return out
