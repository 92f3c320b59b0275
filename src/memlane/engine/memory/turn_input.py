"""What the write path keeps of a finished turn while its work waits (`TurnInput`), and
the ceiling every text it takes in passes (`within_ceiling`).

Its own module so that both the live path (`engine.memory.ingest`) and the turns
re-derived from the store (`engine.memory.rederive`: after a restart, or past the
background queue's bound) build the same thing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from memlane.text.llm import LLMRoute

ANSWER_AFTER = timedelta(microseconds=1)
"""How long after the user's turn entry its answer's is dated: their order is kept, and
a resumed turn finds the answer's entry by it (`engine.memory.resume`)."""

TRUNCATED_MARKER = (
    "\n\n[memlane: {left} more characters of this message are left out of memory "
    "(memory_message_chars = {limit}); the session's transcript keeps it whole]"
)


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What the write path needs from one finished turn (copied: the turn object moves on)."""

    session_id: str
    namespace: str
    model: str | None
    tenant: str = ""
    route: LLMRoute | None = None
    """Where the turn's request went, which memlane's own calls for it follow
    (`text.llm_route`). No credential: safe to keep with queued work."""
    user_text: str = ""
    user_message_id: int | None = None
    assistant_text: str = ""
    said_at: datetime | None = None
    """When the user's message was written (stored); None: now. Facts are valid from it."""
    cut: tuple[tuple[str, int], ...] = ()
    """(role, full length) of each text cut to `memory_message_chars`."""
    user_position: int | None = None
    """The user's message's position in its session: the session's mark moves past it
    once the turn is remembered (`engine.memory.marks`)."""
    entry_ids: tuple[str, ...] = ()
    """The user's turn entries already written (a turn resumed after a stop that came
    between its entries and its facts): not written again."""
    answer_entry_ids: tuple[str, ...] = ()
    """The answer's turn entries already written, likewise: a stop may also come between
    the user's entry and the answer's (each is its own write)."""


@dataclass(frozen=True, slots=True)
class Reread:
    """A session's turns left out of the background queue past its bound
    (`Background.batch`'s stand-in): their job re-reads them from the store, where every
    answered turn past the session's mark is (`engine.memory.rederive`)."""

    session_id: str
    route: LLMRoute | None = None
    """The way the latest of them went (`TurnInput.route`)."""


def held_bytes(item: TurnInput | Reread) -> int:
    """What an item waiting in the background queue holds, as the queue counts it against
    its byte bound (`Background.batch`): a turn's two texts as Python strings (up to four
    bytes a character), the rest a few hundred bytes whatever the turn; a `Reread` none."""
    if isinstance(item, Reread):
        return 0
    return sys.getsizeof(item.user_text) + sys.getsizeof(item.assistant_text)


def within_ceiling(item: TurnInput, limit: int) -> TurnInput:
    """`item` with each text cut to `limit` (`bounded`) and what was cut recorded: every
    turn memory work takes in, from a request or resumed after a restart, passes here."""
    texts = (("user", item.user_text), ("assistant", item.assistant_text))
    cut = tuple((role, len(text)) for role, text in texts if len(text) > limit)
    if not cut:
        return item
    return replace(
        item,
        user_text=bounded(item.user_text, limit),
        assistant_text=bounded(item.assistant_text, limit),
        cut=cut,
    )


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker saying how much was left out: one
    30 MB message would otherwise go whole to the extraction model, into its turn file and
    into git."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED_MARKER.format(left=len(text) - limit, limit=limit)
