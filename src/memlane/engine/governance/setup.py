"""Build a `Governor` from the runtime: the proxy's and the CLI's one place for it."""

from __future__ import annotations

from memlane.config import Settings
from memlane.engine.governance.budget import Budget, context_window
from memlane.engine.governance.cache import Governor
from memlane.engine.governance.ledger import Ledger, MemoryLedger, StoreLedger
from memlane.engine.governance.summarise import Summariser
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.text.llm import LLM
from memlane.types import Session

SUMMARY_INPUT_CHARS = 60_000
"""Most characters of dropped items sent to the summariser in one call."""


def summary_llm(rt: Runtime) -> LLM:
    """The dedicated summary model and base URL when configured, else the runtime's LLM."""
    settings = rt.settings
    if settings.summary_base_url or settings.summary_model:
        from memlane.text.factory import SUMMARY_PURPOSE, make_llm

        return make_llm(settings, purpose=SUMMARY_PURPOSE)
    return rt.llm


def make_summariser(settings: Settings, llm: LLM, model: str | None, budget: Budget) -> Summariser:
    return Summariser(
        llm=llm,
        model=model,
        max_tokens=budget.summary,
        input_chars=min(SUMMARY_INPUT_CHARS, budget.limit * 2),
        verify=settings.governance_summary_verify,
    )


def make_governor(
    rt: Runtime,
    *,
    model: str,
    ledger: Ledger,
    llm: LLM | None,
    summary_model: str | None,
    window_model: str = "",
) -> Governor:
    from memlane.text.factory import make_tokenizer

    settings = rt.settings
    budget = Budget.of(settings, context_window(settings, rt.store, window_model or model))
    summariser = make_summariser(settings, llm, summary_model, budget) if llm is not None else None
    return Governor(
        settings=settings,
        tokenizer=make_tokenizer(settings, model or None),
        budget=budget,
        ledger=ledger,
        summariser=summariser,
        model=model,
    )


def governor_for_turn(rt: Runtime, turn: Turn) -> Governor:
    """Persistent sessions keep their plan in the store.

    Ephemeral turns, and continued ones (the upstream keeps the history, the
    request carries only what is new), get a plan that lives for this request
    only and never call the LLM: only oversized tool outputs are masked.
    """
    settings = rt.settings
    if turn.session is None or turn.continued:
        ledger: Ledger = MemoryLedger()
        llm = None
    else:
        ledger = StoreLedger(settings, rt.store, turn.session.id, turn.key)
        llm = summary_llm(rt)
    model = settings.summary_model or settings.llm_model or turn.model
    gov = make_governor(
        rt,
        model=turn.model,
        ledger=ledger,
        llm=llm,
        summary_model=model,
        window_model=turn.window_model,
    )
    if turn.instructions:
        gov.fixed_tokens = gov.tokenizer.count(turn.instructions)
    return gov


def write_anchor(rt: Runtime, session: Session, snapshot: str) -> None:
    """The new snapshot becomes the scaffold's anchor (`summary.md`), readable and editable."""
    from memlane.engine import scaffold

    scaffold.set_text(rt, session, "summary", snapshot)
