"""Diversity: maximal marginal relevance over the candidates' embeddings.

Greedy: each step takes the candidate maximising

    λ · score − (1 − λ) · max cosine(candidate, already selected)

so five paraphrases of one fact do not crowd out four other useful memories.
λ = `memory_mmr_lambda` (0.7 by default; 1.0 is plain ranking). A candidate
without a vector is treated as unlike everything (similarity 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memlane.engine.retrieval.candidates import Candidate

Vectors = Mapping[str, npt.NDArray[np.float32]]


def mmr(
    candidates: Sequence[Candidate], vectors: Vectors, *, k: int, lam: float
) -> list[Candidate]:
    """Up to `k` candidates in selection order."""
    pool = list(candidates)
    if k <= 0 or not pool:
        return []
    sims = _similarities(pool, vectors)
    chosen: list[int] = []
    best_sim = np.zeros(len(pool), dtype=np.float64)
    remaining = set(range(len(pool)))
    while remaining and len(chosen) < k:
        pick = max(
            remaining,
            key=lambda i: (lam * pool[i].score - (1 - lam) * best_sim[i], -i),
        )
        chosen.append(pick)
        remaining.discard(pick)
        best_sim = np.maximum(best_sim, sims[pick])
    return [pool[i] for i in chosen]


def _similarities(pool: Sequence[Candidate], vectors: Vectors) -> npt.NDArray[np.float64]:
    """Pairwise cosine similarity (vectors are unit length); 0 where a vector is missing."""
    n = len(pool)
    dims = next((len(v) for v in vectors.values()), 0)
    matrix = np.zeros((n, max(dims, 1)), dtype=np.float64)
    for row, candidate in enumerate(pool):
        vector = vectors.get(candidate.ref)
        if vector is not None and len(vector) == dims:
            matrix[row] = vector
    sims: npt.NDArray[np.float64] = matrix @ matrix.T
    return sims
