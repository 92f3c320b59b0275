"""What the keyword index reads for a remembered turn: the turn, its date, its neighbours.

A turn alone is often too short to be found ("Yes, last Tuesday!"): the words a
question uses sit in the turns around it. So the document indexed for a turn
entry (roles `user` and `assistant`) carries its date and the text of its
neighbours in the same conversation: the two turns before it and the one after
(added when that turn arrives, which re-indexes this one), with the turn's own
words weighed twice. What a search
returns, shows and injects is still the turn itself; only the index reads more.
Facts and summaries stay standalone documents. History that governance drops
from a request is indexed the same way (`window_documents`: each dropped message
with the ones around it). A session that session indexing summarised is a document
of its namespace (`session_doc`): its summary, found by its name, description and
tags too. Both backends build documents here, so their keyword scores agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlane.types import DocKind, Fact, Session
from memlane.types.scopes import namespace_scope

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

    @property
    def identity(self) -> tuple[str, str, str, str | None, str | None, str]:
        """(kind, ref, scope, session_id, role, text): the leading columns of a `docs` row
        in both stores; each adds its own terms, time and flags after them."""
        return (self.kind, self.ref, self.scope, self.session_id, self.role, self.text)


def is_turn(fact: Fact) -> bool:
    return fact.role in TURN_ROLES and not fact.deleted


def date_words(moment: datetime) -> str:
    """`8 May 2023`: the words a question about time uses ("in May", "in 2023")."""
    return f"{moment.day} {moment:%B %Y}"


def turn_document(
    fact: Fact, before: Sequence[str], after: Sequence[str], *, weight: int = TURN_WEIGHT
) -> str:
    """The text indexed for a turn entry, given its neighbours' texts (oldest first)."""
    return context_document(
        fact.text, before, after, date=date_words(fact.created_at), weight=weight
    )


def context_document(
    text: str,
    before: Sequence[str],
    after: Sequence[str],
    *,
    date: str = "",
    weight: int = TURN_WEIGHT,
) -> str:
    """An item's words (`weight` times) with its date and its neighbours' words, their
    speaker labels left out: what the index reads for a turn or a dropped message."""
    parts = [date, *[text] * weight]
    parts += [_LABEL.sub("", other, count=1) for other in (*before, *after)]
    return "\n".join(part for part in parts if part)


def window_documents(texts: Sequence[str]) -> list[str]:
    """Context documents for consecutive items of one conversation (dropped history),
    each with the items around it as a turn has (`BEFORE`, `AFTER`)."""
    return [
        context_document(text, texts[max(0, i - BEFORE) : i], texts[i + 1 : i + 1 + AFTER])
        for i, text in enumerate(texts)
    ]


def turn_documents(
    turns: Sequence[Fact], *, before: int = BEFORE, after: int = AFTER, weight: int = TURN_WEIGHT
) -> dict[str, str]:
    """Documents for one conversation's live turns, given in order (a load, a reindex);
    the window and weight are the store's, or others to measure against them."""
    live = [t for t in turns if is_turn(t)]
    out: dict[str, str] = {}
    for i, fact in enumerate(live):
        earlier = [t.text for t in live[max(0, i - before) : i]]
        later = [t.text for t in live[i + 1 : i + 1 + after]]
        out[fact.id] = turn_document(fact, earlier, later, weight=weight)
    return out


NAME_NUMBERED = "name_numbered"
"""Session metadata flag: the name is the model's with `-N` added to keep it distinct
(`engine.sessions.generated_names`). Its summary document indexes the model's name
without the number, which would match every question that says it."""
_NUMBER = re.compile(r"-\d+$")


def session_doc(session: Session) -> tuple[Doc, str] | None:
    """A session's summary as a document of its namespace, with what the index reads for it
    (its name, description, summary and tags); None until session indexing wrote one.

    Dated when it was indexed: recency then favours what was summarised lately."""
    meta = session.metadata
    summary = _text(meta.get("summary"))
    if not summary:
        return None
    tags = meta.get("tags")
    name = _text(meta.get("name"))
    if meta.get(NAME_NUMBERED) is True:
        name = _NUMBER.sub("", name)
    words = [name, _text(meta.get("description")), summary]
    if isinstance(tags, list):
        words.append(" ".join(_text(tag) for tag in tags))
    doc = Doc(
        "session",
        session.id,
        namespace_scope(session.namespace, session.tenant),
        session.id,
        None,
        summary,
        _moment(meta.get("indexed_at")) or session.updated_at,
    )
    return doc, "\n".join(w for w in words if w)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else None
