"""The per-session state block (pinned, anchor, todo, spec), injected append-only."""

from __future__ import annotations

from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.types import Message


async def add_state_block(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    return messages
