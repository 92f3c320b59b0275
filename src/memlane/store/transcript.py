"""Deciding what of a resent history is new: a pure function both backends call in their lock."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SyncPlan:
    matched: int
    """How many incoming messages are already stored, in order."""
    supersede_from: int | None
    """Index into the stored list from which stored messages no longer hold, or None."""


def plan_sync(stored: Sequence[str], incoming: Sequence[str]) -> SyncPlan:
    """Match fingerprints position by position.

    The longest common prefix is already stored. If the stored history goes on
    past a point where the incoming one differs, the client edited or
    regenerated a turn: the stored rest is superseded and the incoming rest is new.
    A request that repeats a prefix of what is stored (a retry) adds nothing.
    """
    # compared in C: a resent history is matched on every turn, whole
    differs = list(map(operator.ne, stored, incoming))
    matched = differs.index(True) if True in differs else len(differs)
    if matched < len(stored) and matched < len(incoming):
        return SyncPlan(matched, matched)
    return SyncPlan(matched, None)
