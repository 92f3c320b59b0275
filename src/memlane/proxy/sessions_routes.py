"""Admin routes for sessions under `/v1/memlane/`: metadata, fork, ask, index, export.

Sessions are named by id, id prefix, key or indexed name, like on the CLI.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from starlette.responses import Response

from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.indexing import index_session
from memlane.engine.sessions.lookup import AmbiguousSession, NoSuchSession, find_session
from memlane.engine.sessions.query import query_session
from memlane.proxy.errors import ProxyError
from memlane.proxy.state import require_admin, runtime
from memlane.store import StoreError
from memlane.text.llm import LLMError
from memlane.types import Session

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


def resolve(rt: Runtime, ref: str) -> Session:
    """The session `ref` names: 404 when none, 409 listing the candidates when several."""
    try:
        return find_session(rt.store, ref)
    except NoSuchSession as exc:
        raise ProxyError(404, str(exc), type="not_found", code="session_not_found") from None
    except AmbiguousSession as exc:
        raise ProxyError(409, str(exc), code="ambiguous_session") from None


def described(rt: Runtime, session: Session) -> dict[str, Any]:
    """The session with its index metadata and derived title."""
    meta = session.metadata
    return {
        "id": session.id,
        "object": "memlane.session",
        "key": session.key,
        "namespace": session.namespace,
        "title": lifecycle.session_title(rt.store, session),
        "name": meta.get("name"),
        "description": meta.get("description"),
        "summary": meta.get("summary"),
        "tags": list(meta.get("tags", [])),
        "parent_id": session.parent_id,
        "message_count": session.message_count,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "cost_usd": session.cost_usd,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


@router.get("/sessions/{ref}/meta", summary="A session's title and index metadata")
def session_meta(rt: Rt, ref: str) -> dict[str, Any]:
    return described(rt, resolve(rt, ref))


@router.post("/sessions/{ref}/fork", summary="Fork a session (a copy with a parent link)")
def fork_session(rt: Rt, ref: str, body: ForkBody) -> dict[str, Any]:
    source = resolve(rt, ref)
    key = body.key or f"{source.key}~fork-{source.message_count}-{_stamp()}"
    try:
        forked = lifecycle.fork(rt.store, source, new_key=key, at_position=body.at)
    except StoreError as exc:
        raise ProxyError(409, str(exc), code="session_exists") from None
    return described(rt, forked)


@router.post("/sessions/{ref}/ask", summary="Answer a question about a past session")
async def ask_session(rt: Rt, ref: str, body: AskBody) -> dict[str, Any]:
    session = await asyncio.to_thread(resolve, rt, ref)
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
async def index(rt: Rt, ref: str, body: IndexBody | None = None) -> dict[str, Any]:
    session = await asyncio.to_thread(resolve, rt, ref)
    result = await index_session(rt, session.id, model=body.model if body else None)
    if not result.ok:
        raise ProxyError(
            502,
            f"indexing failed after {result.attempts} attempt(s): {result.error}",
            type="upstream_error",
            code="index_failed",
        )
    refreshed = await asyncio.to_thread(rt.store.get_session, session.id)
    return described(rt, refreshed or session) | {"attempts": result.attempts}


@router.get("/sessions/{ref}/export", summary="The session as JSON lines")
def export_session(rt: Rt, ref: str) -> Response:
    session = resolve(rt, ref)
    text = "".join(line + "\n" for line in lifecycle.export_lines(rt.store, session))
    return Response(text, media_type="application/x-ndjson")


def _stamp() -> str:
    return f"{datetime.now(UTC):%Y%m%d%H%M%S%f}"
