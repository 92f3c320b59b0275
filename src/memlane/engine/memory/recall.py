"""The read path: recalled memories injected into a turn."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.types import Message


async def recall_for_turn(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    return messages
