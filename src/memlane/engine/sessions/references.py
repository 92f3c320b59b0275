"""`@@name` references to other sessions."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.types import Message


async def resolve_references(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    return messages
