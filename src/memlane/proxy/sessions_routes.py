"""Admin routes for sessions under `/v1/memlane/`: metadata, fork, ask, index, export.

Sessions are named by id, id prefix, key or indexed name, like on the CLI
(`views.sessions`), and rendered the same way; `index`, which rewrites the session's
name and tags, takes no fuzzy match (`ExactSession`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from starlette.responses import Response

from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.indexing import index_session
from memlane.engine.sessions.query import query_session
from memlane.proxy.errors import ProxyError
from memlane.proxy.lookup import ExactSession, FoundSession
from memlane.proxy.state import require_admin, runtime
from memlane.store import StoreError
from memlane.text.llm import LLMError
from memlane.views.sessions import session_json

router = APIRouter(prefix="/v1/memlane", tags=["sessions"], dependencies=[Depends(require_admin)])

Rt = Annotated[Runtime, Depends(runtime)]


class AskBody(BaseModel):
    question: str = Field(min_length=1, description="What to ask about the session.")
    model: str | None = Field(default=None, description="Model to answer with.")


class IndexBody(BaseModel):
    model: str | None = Field(default=None, description="Model that writes the metadata.")


class ForkBody(BaseModel):
    at: int | None = Field(default=None, ge=0, description="Copy only messages before this.")
    key: str | None = Field(default=None, min_length=1, description="Key of the new session.")


@router.get("/sessions/{ref}/meta", summary="A session's title and index metadata")
def session_meta(rt: Rt, session: FoundSession) -> dict[str, Any]:
    return session_json(rt.store, session)


@router.post("/sessions/{ref}/fork", summary="Fork a session (a copy with a parent link)")
def fork_session(rt: Rt, session: FoundSession, body: ForkBody) -> dict[str, Any]:
    try:
        forked = lifecycle.fork(rt.store, session, new_key=body.key, at_position=body.at)
    except lifecycle.ForkPointOutOfRange as exc:
        raise ProxyError(400, exc.explain("at"), code="invalid_fork_point", param="at") from None
    except StoreError as exc:
        raise ProxyError(409, str(exc), code="session_exists") from None
    return session_json(rt.store, forked)


@router.post("/sessions/{ref}/ask", summary="Answer a question about a past session")
async def ask_session(session: FoundSession, rt: Rt, body: AskBody) -> dict[str, Any]:
    try:
        answer = await query_session(rt, session, body.question, model=body.model)
    except LLMError as exc:
        raise ProxyError(
            502, f"the query model failed: {exc}", type="upstream_error", code="llm_error"
        ) from None
    return {
        "object": "memlane.session.answer",
        "id": session.id,
        "question": body.question,
        "answer": answer.text,
        "model": answer.model,
        "cost_usd": answer.cost_usd,
    }


@router.post("/sessions/{ref}/index", summary="Generate the session's metadata now")
async def index(rt: Rt, session: ExactSession, body: IndexBody | None = None) -> dict[str, Any]:
    result = await index_session(rt, session.id, model=body.model if body else None)
    if not result.ok:
        raise ProxyError(
            502,
            f"indexing failed after {result.attempts} attempt(s): {result.error}",
            type="upstream_error",
            code="index_failed",
        )
    refreshed = await asyncio.to_thread(rt.store.get_session, session.id)
    shown = await asyncio.to_thread(session_json, rt.store, refreshed or session)
    return shown | {"attempts": result.attempts}


@router.get("/sessions/{ref}/export", summary="The session as JSON lines")
def export_session(rt: Rt, session: FoundSession) -> Response:
    text = "".join(line + "\n" for line in lifecycle.export_lines(rt.store, session))
    return Response(text, media_type="application/x-ndjson")
