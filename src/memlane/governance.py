"""`memlane.govern`: context governance as a library, on plain Chat Completions message lists.

No proxy and no store are needed. The same engine the proxy runs keeps the
list inside the model's window: old large tool outputs are masked, the middle
is summarised (with `llm`, else replaced by a static marker), the splice never
separates a tool call from its results, and a list that cannot fit raises
`ContextOverflow`.

Keep one `GovernedHistory` per conversation and pass it on every call: it
holds the compaction plan, so a list that only grew is governed exactly as
before plus its new messages (the forwarded prefix stays byte-stable and
provider prompt caches keep hitting), and dropped messages stay recallable.

    history = GovernedHistory(model="gpt-4o")
    trimmed = memlane.govern(messages, history=history)           # sync
    trimmed = await memlane.agovern(messages, history=history)    # async
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memlane.config import Settings
from memlane.engine.governance.cache import Governor, Stats
from memlane.engine.governance.errors import ContextOverflow
from memlane.engine.governance.flow import govern as run
from memlane.engine.governance.ledger import MemoryLedger
from memlane.engine.governance.setup import build_governor
from memlane.library import load
from memlane.proxy.wire.chat import parse_message, wire_messages
from memlane.text.factory import make_tokenizer
from memlane.text.llm import LLM
from memlane.types import Message

__all__ = ["ContextOverflow", "GovernedHistory", "agovern", "govern"]


class GovernedHistory:
    """One conversation's governance state, kept in memory between calls."""

    def __init__(
        self,
        *,
        model: str,
        settings: Settings | None = None,
        llm: LLM | None = None,
        summary_model: str | None = None,
        outputs_dir: Path | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or load()  # the configuration every command reads
        self.llm = llm
        self.summary_model = summary_model or model
        self.ledger = MemoryLedger(outputs_dir)
        self.last: Stats | None = None
        """What the latest call did (tokens in and out, compaction, summariser calls)."""

    def governor(self) -> Governor:
        return build_governor(
            self.settings,
            model=self.model,
            tokenizer=make_tokenizer(self.settings, self.model),
            ledger=self.ledger,
            llm=self.llm,
            summary_model=self.summary_model,
        )


async def agovern_messages(
    messages: Sequence[Message], history: GovernedHistory, *, query: str | None = None
) -> list[Message]:
    """The engine-level call: internal `Message`s in, `Message`s out (for other adapters)."""
    if not history.settings.governance_enabled:
        return list(messages)
    user_text = query if query is not None else _last_user_text(messages)
    governed = await run(history.governor(), messages, user_text=user_text)
    history.last = governed.stats
    return governed.messages


async def agovern(
    messages: Sequence[Mapping[str, Any]],
    *,
    history: GovernedHistory | None = None,
    model: str = "gpt-4o",
    llm: LLM | None = None,
) -> list[dict[str, Any]]:
    """Chat Completions messages in, the governed list out (unchanged ones are the same dicts)."""
    history = history or GovernedHistory(model=model, llm=llm)
    parsed = [parse_message(dict(m), f"messages[{i}]") for i, m in enumerate(messages)]
    out = await agovern_messages(parsed, history)
    return wire_messages(out)


def govern(
    messages: Sequence[Mapping[str, Any]],
    *,
    history: GovernedHistory | None = None,
    model: str = "gpt-4o",
    llm: LLM | None = None,
) -> list[dict[str, Any]]:
    """Synchronous `agovern`, for code without an event loop."""
    return asyncio.run(agovern(messages, history=history, model=model, llm=llm))


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "user" and message.kind == "message":
            return message.text
    return ""
