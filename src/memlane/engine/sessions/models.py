"""The model session metadata and queries use, and what a call cost.

Summaries, session metadata and session queries are cheap-model work, sent to
`Runtime.summary_llm` (the rule for every own call is in `engine.runtime`). The
metadata and query model is `index_model`, then `Runtime.summary_model`'s rule
(`summary_model`, `llm_model`, the request's model); outside a request, the model
that last indexed the session, else the model the session's own requests used.
"""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.text.llm import Completion
from memlane.types import Session


def index_model(
    rt: Runtime, request_model: str | None = None, session: Session | None = None
) -> str | None:
    """The index/query model; outside a request (CLI, admin API), the session's own."""
    chosen = rt.settings.index_model or rt.summary_model(request_model)
    if chosen is None and session is not None:
        for key in ("indexed_model", "model"):
            last = session.metadata.get(key)
            if isinstance(last, str) and last:
                return last
    return chosen


def cost_usd(rt: Runtime, completion: Completion) -> float:
    """Cost of one cheap-model call at the configured per-million-token prices."""
    settings = rt.settings
    return (
        completion.prompt_tokens * settings.index_price_input
        + completion.completion_tokens * settings.index_price_output
    ) / 1_000_000


def usage_payload(rt: Runtime, completion: Completion) -> dict[str, object]:
    """What an event records about a call: model, tokens and cost."""
    return {
        "model": completion.model,
        "usage": {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
        },
        "cost_usd": round(cost_usd(rt, completion), 8),
    }
