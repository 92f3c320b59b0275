"""Memories as every face shows them: one JSON shape, one way to find one from a reference.

A memory is named by its full id or by a unique prefix of at least 6 characters
(`engine.memory.manage.get_memory`); no match, a shorter prefix or several matches
raise `MemoryNotFound` with a message that says what to type instead.
"""

from __future__ import annotations

from typing import Any

from memlane.engine.memory import scopes
from memlane.engine.memory.manage import MemoryNotFound, get_memory
from memlane.engine.memory.stale import Staleness
from memlane.store.codec import cites_to_json
from memlane.types import Fact

OBJECT = "memlane.memory"

__all__ = ["OBJECT", "MemoryNotFound", "code_json", "get_memory", "memory_json"]


def memory_json(fact: Fact, score: float | None = None) -> dict[str, Any]:
    """A memory with its provenance and when it was true (`valid_to` None: still true);
    `score` when it comes from a search. `about`: `user` (the tenant's global scope, recalled
    everywhere), `project` (in `namespace`) or `conversation` (`scopes.about`)."""
    kind, name = scopes.about(fact.scope)
    out: dict[str, Any] = {
        "object": OBJECT,
        "id": fact.id,
        "scope": fact.scope,
        "about": kind,
        "namespace": name if kind == scopes.PROJECT else None,
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
        "cites": cites_to_json(fact.cites) if fact.cites is not None else None,
    }
    if score is not None:
        out["score"] = round(score, 4)
    return out


def code_json(status: Staleness) -> dict[str, Any]:
    """A memory's cited files checked now: `status` (current, changed, moved, deleted,
    unchecked), `stale`, the `note` recall shows, each file's status and new path, and the
    commit range when HEAD moved."""
    return {
        "status": status.status,
        "stale": status.stale,
        "note": status.note or None,
        "commits": status.commits,
        "files": [
            {"path": f.path, "status": f.status, "moved_to": f.moved_to} for f in status.files
        ],
    }
