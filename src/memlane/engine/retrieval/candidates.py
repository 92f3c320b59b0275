"""What retrieval ranks: one candidate per document, with what each first-stage list said."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memlane.types import DocKind, Hit


@dataclass(frozen=True, slots=True)
class Candidate:
    """A document on its way through the stages.

    `relevance` is in [0, 1] (fusion or reranker score, min-max normalised);
    `score` is what the final ordering uses (relevance blended with recency).
    """

    kind: DocKind
    ref: str
    scope: str
    session_id: str | None
    text: str
    created_at: datetime
    keyword_rank: int | None = None
    keyword_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    relevance: float = 0.0
    score: float = 0.0
    role: str | None = None
    """A fact's role, as the store indexed it (a turn is `user` or `assistant`)."""

    @property
    def key(self) -> tuple[DocKind, str]:
        return (self.kind, self.ref)

    def scored(self, relevance: float, score: float) -> Candidate:
        """This candidate with new scores. Not `dataclasses.replace`, which looks the fields
        up again on every call: at about 5 µs a copy and 90 copies a query, that was half
        of a search's time (LoCoMo, `ranked` 0.96 ms p50)."""
        return Candidate(
            self.kind,
            self.ref,
            self.scope,
            self.session_id,
            self.text,
            self.created_at,
            self.keyword_rank,
            self.keyword_score,
            self.dense_rank,
            self.dense_score,
            relevance,
            score,
            self.role,
        )


def from_hits(keyword: list[Hit], dense: list[Hit]) -> list[Candidate]:
    """Merge the two first-stage lists (best first each) into one candidate per document."""
    merged: dict[tuple[DocKind, str], Candidate] = {}
    for rank, hit in enumerate(keyword, start=1):
        key = (hit.kind, hit.ref)
        if key not in merged:
            merged[key] = _candidate(hit, keyword=(rank, hit.score))
    for rank, hit in enumerate(dense, start=1):
        key = (hit.kind, hit.ref)
        current = merged.get(key)
        if current is None:
            merged[key] = _candidate(hit, dense=(rank, hit.score))
        elif current.dense_rank is None:
            found = (current.keyword_rank, current.keyword_score)
            merged[key] = _candidate(hit, keyword=found, dense=(rank, hit.score))
    return list(merged.values())


Ranked = tuple[int | None, float | None]
"""A first-stage list's (rank, score) for a document: (None, None) where it was not found."""


def _candidate(
    hit: Hit, *, keyword: Ranked = (None, None), dense: Ranked = (None, None)
) -> Candidate:
    return Candidate(
        hit.kind,
        hit.ref,
        hit.scope,
        hit.session_id,
        hit.text,
        hit.created_at,
        *keyword,
        *dense,
        0.0,
        0.0,
        hit.role,  # positional: keywords cost a frozen dataclass twice the time
    )
