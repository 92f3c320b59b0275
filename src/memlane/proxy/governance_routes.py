"""Context governance's admin routes: the next request by part, manual compaction, and the
offloaded tool outputs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from starlette.responses import PlainTextResponse

from memlane.engine.governance.breakdown import breakdown
from memlane.engine.governance.compact import CompactionError, NoModel, compact_session
from memlane.engine.governance.ledger import (
    OutputNotFound,
    offloaded_output,
    offloaded_outputs,
    outputs_folder,
)
from memlane.engine.runtime import Runtime
from memlane.proxy.errors import ProxyError
from memlane.proxy.lookup import ExactSession, FoundSession
from memlane.proxy.state import require_admin, runtime
from memlane.text.llm import LLMError
from memlane.views.sessions import compaction_json

router = APIRouter(prefix="/v1/memlane", tags=["memlane"], dependencies=[Depends(require_admin)])

Rt = Annotated[Runtime, Depends(runtime)]


class CompactBody(BaseModel):
    model: str | None = Field(
        default=None, description="Model to summarise with; default: the session's last model."
    )


@router.get(
    "/sessions/{ref}/context",
    summary="What the session's next request would forward, by part, in tokens",
)
async def context(rt: Rt, session: FoundSession, events: int = 5) -> dict[str, Any]:
    result = await breakdown(rt, session, events=max(0, min(events, 100)))
    return {"object": "memlane.context", **result.to_json()}


@router.post("/sessions/{ref}/compact", summary="Compact the session's history now")
async def compact(rt: Rt, session: ExactSession, body: CompactBody | None = None) -> dict[str, Any]:
    try:
        result = await compact_session(rt, session.id, model=body.model if body else None)
    except NoModel as exc:
        raise ProxyError(400, str(exc), code="model_required", param="model") from None
    except (CompactionError, LLMError) as exc:
        raise ProxyError(502, str(exc), type="upstream_error", code="compaction_failed") from None
    return compaction_json(result)


@router.get("/sessions/{ref}/tool-outputs", summary="Tool outputs governance offloaded")
def list_outputs(rt: Rt, session: FoundSession) -> dict[str, Any]:
    return {"object": "list", "data": offloaded_outputs(rt.store, session.id)}


@router.get(
    "/sessions/{ref}/tool-outputs/{output_id}",
    summary="The full text of one offloaded tool output",
    response_class=PlainTextResponse,
)
def get_output(rt: Rt, session: FoundSession, output_id: int) -> PlainTextResponse:
    try:
        folder = outputs_folder(rt.settings, session)
        return PlainTextResponse(offloaded_output(rt.store, session.id, output_id, folder=folder))
    except OutputNotFound as exc:
        raise ProxyError(404, str(exc), type="not_found", code="output_not_found") from None
