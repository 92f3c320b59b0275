"""The write path: facts from what the user said, after the response."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer, Turn


def schedule_ingest(rt: Runtime, turn: Turn, answer: Answer) -> None:
    return None
