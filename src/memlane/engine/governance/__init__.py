"""Context governance: keep a request inside the model's window."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.types import Message


async def govern_turn(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    return messages
