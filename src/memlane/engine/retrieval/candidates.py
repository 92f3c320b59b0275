"""What retrieval ranks: one candidate per document, with what each first-stage list said."""

from __future__ import annotations

from dataclasses import dataclass, replace
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

    @property
    def key(self) -> tuple[DocKind, str]:
        return (self.kind, self.ref)


def from_hits(keyword: list[Hit], dense: list[Hit]) -> list[Candidate]:
    """Merge the two first-stage lists (best first each) into one candidate per document."""
    merged: dict[tuple[DocKind, str], Candidate] = {}
    for rank, hit in enumerate(keyword, start=1):
        key = (hit.kind, hit.ref)
        if key not in merged:
            merged[key] = replace(_candidate(hit), keyword_rank=rank, keyword_score=hit.score)
    for rank, hit in enumerate(dense, start=1):
        key = (hit.kind, hit.ref)
        current = merged.get(key) or _candidate(hit)
        if current.dense_rank is None:
            merged[key] = replace(current, dense_rank=rank, dense_score=hit.score)
    return list(merged.values())


def _candidate(hit: Hit) -> Candidate:
    return Candidate(
        kind=hit.kind,
        ref=hit.ref,
        scope=hit.scope,
        session_id=hit.session_id,
        text=hit.text,
        created_at=hit.created_at,
    )
