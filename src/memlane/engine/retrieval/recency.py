"""Recency: recent memories count more, old ones fade with a 30-day time constant.

    score = (1 − w) · relevance + w · exp(−age_days / 30)

with w = `memory_recency_weight` (0.2 by default). A memory dated in the
future (clock skew, a hand edit) counts as brand new, never as more than new.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from memlane.engine.retrieval.candidates import Candidate

DECAY_DAYS = 30.0


def recency(created_at: datetime, now: datetime) -> float:
    """exp(−age_days / 30), in (0, 1]."""
    age = (_aware(now) - _aware(created_at)).total_seconds() / 86_400
    return math.exp(-max(age, 0.0) / DECAY_DAYS)


def apply_recency(
    candidates: Sequence[Candidate], *, now: datetime, weight: float
) -> list[Candidate]:
    """Blend relevance with recency into `score`, best first."""
    scored = [
        c.scored(c.relevance, (1 - weight) * c.relevance + weight * recency(c.created_at, now))
        for c in candidates
    ]
    return sorted(scored, key=lambda c: -c.score)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
