"""What the keyword index reads for a remembered turn: the turn, its date, its neighbours.

A turn alone is often too short to be found ("Yes, last Tuesday!"): the words a
question uses sit in the turns around it. So the document indexed for a turn
entry (roles `user` and `assistant`) carries its date and the text of its
neighbours in the same conversation: the two turns before it and the one after
(added when that turn arrives, which re-indexes this one), with the turn's own
words weighed twice. What a search
returns, shows and injects is still the turn itself; only the index reads more.
Facts and summaries stay standalone documents. Both backends build documents
here, so their keyword scores agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memlane.types import DocKind, Fact

TURN_ROLES: tuple[str, ...] = ("user", "assistant")
BEFORE = 2
AFTER = 1
TURN_WEIGHT = 2
"""The turn's own words count twice against its neighbours' (a field weight): measured on
LoCoMo dev, R@10 0.749 -> 0.760, better on four of five conversations (README)."""

# A leading speaker label ("Caroline: …", "Dr Smith: …"): a neighbour's words count, not
# whose they were, or every document of a two-person conversation shares both names.
_LABEL = re.compile(r"^\s*[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}: ")


@dataclass(frozen=True, slots=True)
class Doc:
    """One search document: what a hit shows and where it belongs."""

    kind: DocKind
    ref: str
    scope: str
    session_id: str | None
    role: str | None
    text: str
    created_at: datetime
    active: bool = True


def is_turn(fact: Fact) -> bool:
    return fact.role in TURN_ROLES and not fact.deleted


def date_words(moment: datetime) -> str:
    """`8 May 2023`: the words a question about time uses ("in May", "in 2023")."""
    return f"{moment.day} {moment:%B %Y}"


def turn_document(fact: Fact, before: Sequence[str], after: Sequence[str]) -> str:
    """The text indexed for a turn entry, given its neighbours' texts (oldest first)."""
    parts = [date_words(fact.created_at), *[fact.text] * TURN_WEIGHT]
    parts += [_LABEL.sub("", text, count=1) for text in (*before, *after)]
    return "\n".join(part for part in parts if part)


def turn_documents(turns: Sequence[Fact]) -> dict[str, str]:
    """Documents for one conversation's live turns, given in order (a load, a reindex)."""
    live = [t for t in turns if is_turn(t)]
    out: dict[str, str] = {}
    for i, fact in enumerate(live):
        before = [t.text for t in live[max(0, i - BEFORE) : i]]
        after = [t.text for t in live[i + 1 : i + 1 + AFTER]]
        out[fact.id] = turn_document(fact, before, after)
    return out
