"""memlane's own HTTP API under `/v1/memlane/`: sessions, their state texts, Spec Mode approval.

Every route here requires the admin token. Other parts of memlane add their routes
in their own modules with the same dependencies (`proxy.state.require_admin`,
`proxy.state.runtime`) and are included in `proxy.app.admin_routers`. A `{ref}`
is a session id, unique id prefix, key or name (`views.sessions`); a route that
changes or deletes the session takes no fuzzy match (`ExactSession`). Sessions are
rendered by `views.sessions` as on the CLI.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from memlane.engine import scaffold
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.files.git_purge import PurgeError
from memlane.proxy.errors import ProxyError
from memlane.proxy.lookup import Caller, ExactSession, FoundSession
from memlane.proxy.state import require_admin, runtime
from memlane.types import Session
from memlane.views.sessions import session_detail, session_json

router = APIRouter(prefix="/v1/memlane", tags=["memlane"], dependencies=[Depends(require_admin)])

Rt = Annotated[Runtime, Depends(runtime)]


class TextBody(BaseModel):
    text: str | None = Field(description="The new text; null or empty clears it.")


@router.get("/sessions", summary="List sessions, newest activity first")
def list_sessions(
    rt: Rt,
    caller: Caller,
    namespace: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> dict[str, Any]:
    sessions = rt.store.list_sessions(namespace=namespace, limit=limit, tenant=caller.tenant)
    return {"object": "list", "data": [session_json(rt.store, s) for s in sessions]}


@router.get("/sessions/{ref}", summary="One session with its summary, todo and pinned")
def show_session(rt: Rt, session: FoundSession) -> dict[str, Any]:
    return session_detail(rt, session)


@router.put("/sessions/{ref}/todo", summary="Set the session's TODO")
def set_todo(rt: Rt, session: ExactSession, body: TextBody) -> dict[str, Any]:
    return _set_text(rt, session, "todo", body.text)


@router.put("/sessions/{ref}/pinned", summary="Set the session's pinned text")
def set_pinned(rt: Rt, session: ExactSession, body: TextBody) -> dict[str, Any]:
    return _set_text(rt, session, "pinned", body.text)


def _set_text(rt: Runtime, session: Session, name: str, text: str | None) -> dict[str, Any]:
    """The session as set, and `cut`: the length the text was cut to (its setting, as every
    face says it: `scaffold.cut_at`), or null when it was kept whole."""
    scaffold.set_text(rt, session, name, text)
    return session_detail(rt, session) | {"cut": scaffold.cut_at(rt.settings, name, text)}


@router.post("/sessions/{ref}/approve-spec", summary="Approve the spec (ends Spec Mode)")
def approve_spec(rt: Rt, session: ExactSession) -> dict[str, Any]:
    return session_detail(rt, scaffold.approve_spec(rt, session.id))


@router.delete("/sessions/{ref}", summary="Delete a session and everything of it, for good")
def delete_session(rt: Rt, session: ExactSession) -> dict[str, Any]:
    """Purged as `memlane sessions delete --purge` does: no copy stays in the memory's git
    history or the database's files (the history of the memory repository is rewritten)."""
    try:
        deleted = lifecycle.delete(rt.store, rt.settings, session, purge=True)
    except PurgeError as exc:  # it says what is done, and what finishes it
        raise ProxyError(500, str(exc), type="server_error", code="purge_failed") from None
    return {
        "id": session.id,
        "object": "memlane.session.deleted",
        "deleted": deleted,
        "purged": True,
    }
