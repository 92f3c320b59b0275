"""Fusion: one relevance per candidate from the keyword and dense lists.

Two documented methods:

- `rrf` (weighted reciprocal rank fusion): Σ wᵢ / (k + rankᵢ) over the lists
  that found the document; robust to the two lists' incomparable score scales.
- `score` (normalised score fusion): each list's raw scores are min-max scaled
  to [0, 1] within the list, then Σ wᵢ · scaledᵢ; a document one list missed
  gets 0 from it. It keeps how *much* better the best hits are, which ranks
  alone throw away.

Either way the fused values are then min-max normalised over the batch, so the
best candidate has relevance 1.0 and the worst 0.0, the same scale a reranker's
output gets and the scale the recency blend and the threshold expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from memlane.engine.retrieval.candidates import Candidate

FusionMethod = Literal["rrf", "score"]
RRF_K = 60


def fuse(
    candidates: Sequence[Candidate],
    *,
    keyword_weight: float = 1.0,
    dense_weight: float = 1.0,
    method: FusionMethod = "score",
    rrf_k: int = RRF_K,
) -> list[Candidate]:
    """Candidates with `relevance` set, best first (ties keep their input order)."""
    if not candidates:
        return []
    if method == "rrf":
        raw = [_rrf(c, keyword_weight, dense_weight, rrf_k) for c in candidates]
    else:
        kw = _scaled([c.keyword_score for c in candidates])
        dn = _scaled([c.dense_score for c in candidates])
        raw = [keyword_weight * k + dense_weight * d for k, d in zip(kw, dn, strict=True)]
    relevance = min_max(raw)
    fused = [c.scored(r, r) for c, r in zip(candidates, relevance, strict=True)]
    return sorted(fused, key=lambda c: -c.relevance)


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1] over the batch; a batch of equal values is all 1.0 (all equally good)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return [1.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def _rrf(candidate: Candidate, kw: float, dn: float, k: int) -> float:
    total = 0.0
    if candidate.keyword_rank is not None:
        total += kw / (k + candidate.keyword_rank)
    if candidate.dense_rank is not None:
        total += dn / (k + candidate.dense_rank)
    return total


def _scaled(scores: Sequence[float | None]) -> list[float]:
    """Min-max over the scores a list gave; documents it did not return get 0."""
    present = [s for s in scores if s is not None]
    if not present:
        return [0.0] * len(scores)
    low, high = min(present), max(present)
    span = high - low
    out = []
    for s in scores:
        if s is None:
            out.append(0.0)
        elif span <= 1e-12:
            out.append(1.0)
        else:
            out.append((s - low) / span)
    return out
