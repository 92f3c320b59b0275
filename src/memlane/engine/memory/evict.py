"""Eviction: keep each conversation within `memory_max_entries`.

Facts and turns count; the oldest (by `created_at`) go first; summaries are
exempt. Evicted entries are soft-deleted (moved under `deleted/`), never lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.types import Fact


def choose_evictions(entries: Sequence[Fact], max_entries: int) -> list[Fact]:
    """The entries to evict, oldest first; active non-summary entries only count."""
    countable = [e for e in entries if not e.deleted and e.role != "summary"]
    excess = len(countable) - max_entries
    if excess <= 0:
        return []
    ordered = sorted(countable, key=lambda e: (e.created_at, e.id))
    return ordered[:excess]
