"""Build a `Governor`: the proxy's, the CLI's and the library's one place for it."""

from __future__ import annotations

from collections.abc import Mapping

from memlane.config import Settings
from memlane.engine.governance.budget import Budget, context_window
from memlane.engine.governance.cache import Governor
from memlane.engine.governance.ledger import Ledger, MemoryLedger, StoreLedger
from memlane.engine.governance.summarise import Summariser
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import write_made
from memlane.engine.turn import Turn
from memlane.store import MetaStore
from memlane.text.llm import LLM
from memlane.text.tokens import Tokenizer
from memlane.types import Session

SUMMARY_INPUT_CHARS = 60_000
"""Most characters of dropped items sent to the summariser in one call."""


def make_summariser(settings: Settings, llm: LLM, model: str | None, budget: Budget) -> Summariser:
    return Summariser(
        llm=llm,
        model=model,
        max_tokens=budget.summary,
        input_chars=min(SUMMARY_INPUT_CHARS, budget.limit * 2),
        verify=settings.governance_summary_verify,
    )


def build_governor(
    settings: Settings,
    *,
    model: str,
    tokenizer: Tokenizer,
    ledger: Ledger,
    llm: LLM | None,
    summary_model: str | None,
    store: MetaStore | None = None,
    window_model: str = "",
    client_compacts: bool = False,
) -> Governor:
    """A governor for `model`'s window (learned windows come from `store`; `window_model`,
    when given, names the window instead: `<model>[1m]`); with no `llm` it never summarises
    (static markers only). `client_compacts`: see `Budget.of`."""
    window = context_window(settings, store, window_model or model)
    budget = Budget.of(settings, window, client_compacts=client_compacts)
    summariser = make_summariser(settings, llm, summary_model, budget) if llm is not None else None
    return Governor(
        settings=settings,
        tokenizer=tokenizer,
        budget=budget,
        ledger=ledger,
        summariser=summariser,
        model=model,
    )


def make_governor(
    rt: Runtime,
    *,
    model: str,
    ledger: Ledger,
    llm: LLM | None,
    summary_model: str | None,
    window_model: str = "",
    client_compacts: bool = False,
) -> Governor:
    return build_governor(
        rt.settings,
        model=model,
        tokenizer=rt.tokenizer_for(model),
        ledger=ledger,
        llm=llm,
        summary_model=summary_model,
        store=rt.windows,
        window_model=window_model,
        client_compacts=client_compacts,
    )


def store_ledger(
    rt: Runtime, session: Session, *, state: Mapping[str, str] | None = None
) -> StoreLedger:
    """The session's plan and offloaded outputs in the store (outputs on disk with SQLite);
    `state`: the session's state, when the caller has read it already."""
    return StoreLedger(
        rt.settings,
        rt.store,
        session.id,
        session.key,
        files=rt.store_kind == "sqlite",
        tenant=session.tenant,
        state=state,
    )


def governor_for_turn(rt: Runtime, turn: Turn) -> Governor:
    """Persistent sessions keep their plan in the store.

    Ephemeral turns, and continued ones (the upstream keeps the history, the
    request carries only what is new), get a plan that lives for this request
    only and never call the LLM: only oversized tool outputs are masked.
    """
    if turn.session is None or turn.continued:
        ledger: Ledger = MemoryLedger()
        llm = None
    else:
        ledger = store_ledger(rt, turn.session, state=turn.state)
        made = turn.made_ahead
        if made is not None:
            ledger.row = lambda: write_made(rt.store, made)
        llm = rt.summary_llm
    summary_model = rt.summary_model(turn.model)
    gov = make_governor(
        rt,
        model=turn.model,
        ledger=ledger,
        llm=llm,
        summary_model=summary_model,
        window_model=turn.window_model,
        client_compacts=turn.client_compacts,
    )
    if turn.instructions:
        gov.fixed_tokens = gov.tokenizer.count(turn.instructions)
    return gov


def write_anchor(rt: Runtime, session: Session, snapshot: str) -> None:
    """The new snapshot becomes the scaffold's anchor (`summary.md`), readable and editable."""
    from memlane.engine import scaffold

    scaffold.set_text(rt, session, "summary", snapshot)
