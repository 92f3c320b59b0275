"""Which LLM client and model the sessions features call, and what a call cost.

Summaries, session metadata and session queries are cheap-model work. A
dedicated summary endpoint (`summary_base_url`) gets its own client; otherwise
the runtime's LLM is used (which is also how tests and library users inject
one). The model is the first configured of the feature's own setting,
`summary_model`, `llm_model`, then the model of the request that triggered it
(outside a request: the model that last indexed the session, else the model the
session's own requests used).
"""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.text.llm import LLM, Completion
from memlane.types import Session


def cheap_llm(rt: Runtime) -> LLM:
    """The client for summaries, metadata and queries."""
    if rt.settings.summary_base_url:
        from memlane.text.factory import SUMMARY_PURPOSE, make_llm

        return make_llm(rt.settings, purpose=SUMMARY_PURPOSE, clients=rt.llm_clients)
    return rt.llm


def summary_model(rt: Runtime, request_model: str | None = None) -> str | None:
    settings = rt.settings
    return settings.summary_model or settings.llm_model or request_model or None


def index_model(
    rt: Runtime, request_model: str | None = None, session: Session | None = None
) -> str | None:
    """The index/query model; outside a request (CLI, admin API), the session's own."""
    chosen = rt.settings.index_model or summary_model(rt, request_model)
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
