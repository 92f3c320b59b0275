"""memlane's own HTTP API under `/v1/memlane/`: sessions, their state texts, Spec Mode approval.

Every route here requires the admin token when `MEMLANE_ADMIN_TOKEN` is set.
Other parts of memlane add their routes in their own modules with the same
dependencies (`proxy.state.require_admin`, `proxy.state.runtime`) and are
included in `proxy.app.admin_routers`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from memlane.engine import scaffold
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.proxy.errors import ProxyError
from memlane.proxy.state import require_admin, runtime
from memlane.types import Session

router = APIRouter(prefix="/v1/memlane", tags=["memlane"], dependencies=[Depends(require_admin)])

Rt = Annotated[Runtime, Depends(runtime)]


class TextBody(BaseModel):
    text: str | None = Field(description="The new text; null or empty clears it.")


def session_json(session: Session) -> dict[str, Any]:
    return {
        "id": session.id,
        "object": "memlane.session",
        "key": session.key,
        "namespace": session.namespace,
        "title": session.title,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
        "parent_id": session.parent_id,
        "message_count": session.message_count,
        "summary": session.summary,
        "summarized_count": session.summarized_count,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "metadata": dict(session.metadata),
    }


def find(rt: Runtime, session_id: str) -> Session:
    """A session by id, or by its key."""
    session = rt.store.get_session(session_id) or rt.store.find_session(session_id)
    if session is None:
        raise ProxyError(
            404, f"no session {session_id!r}", type="not_found", code="session_not_found"
        )
    return session


def detail(rt: Runtime, session: Session) -> dict[str, Any]:
    texts = scaffold.read_texts(rt, session)
    return session_json(session) | {
        "todo": texts.get("todo", ""),
        "pinned": texts.get("pinned", ""),
        "anchor": texts.get("summary", ""),
        "spec_approved": bool(texts.get("spec_approved")),
    }


@router.get("/sessions", summary="List sessions, newest activity first")
def list_sessions(
    rt: Rt,
    namespace: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> dict[str, Any]:
    sessions = rt.store.list_sessions(namespace=namespace, limit=limit)
    return {"object": "list", "data": [session_json(s) for s in sessions]}


@router.get("/sessions/{session_id}", summary="One session with its summary, todo and pinned")
def show_session(rt: Rt, session_id: str) -> dict[str, Any]:
    return detail(rt, find(rt, session_id))


@router.put("/sessions/{session_id}/todo", summary="Set the session's TODO")
def set_todo(rt: Rt, session_id: str, body: TextBody) -> dict[str, Any]:
    session = find(rt, session_id)
    scaffold.set_text(rt, session, "todo", body.text)
    return detail(rt, session)


@router.put("/sessions/{session_id}/pinned", summary="Set the session's pinned text")
def set_pinned(rt: Rt, session_id: str, body: TextBody) -> dict[str, Any]:
    session = find(rt, session_id)
    scaffold.set_text(rt, session, "pinned", body.text)
    return detail(rt, session)


@router.post("/sessions/{session_id}/approve-spec", summary="Approve the spec (ends Spec Mode)")
def approve_spec(rt: Rt, session_id: str) -> dict[str, Any]:
    session = scaffold.approve_spec(rt, find(rt, session_id).id)
    return detail(rt, session)


@router.delete("/sessions/{session_id}", summary="Delete a session and everything of it")
def delete_session(rt: Rt, session_id: str) -> dict[str, Any]:
    session = find(rt, session_id)
    scaffold.forget_texts(rt, session)
    deleted = lifecycle.delete(rt.store, rt.settings, session)
    return {"id": session.id, "object": "memlane.session.deleted", "deleted": deleted}
