"""Session metadata (name, description, summary, tags), generated in the background."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn


def schedule_index(rt: Runtime, turn: Turn) -> None:
    return None
