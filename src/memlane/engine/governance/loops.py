"""Loop detection: the same tool call, again and again, is answered with a note.

An agent stuck in a loop repeats one call (same tool, same arguments) and burns
its context window. When the newest `governance_loop_threshold` calls of the
current turn are identical, governance records an event (once per loop) and
appends a note for the model at the end of the request, where it does not
disturb the cached prefix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from memlane.engine.governance.structure import is_user_turn
from memlane.types import Message

LOOP_NOTE = (
    "[memlane: the tool call `{name}` has been made {count} times in a row with identical "
    "arguments. Repeating it will not give a different result: change approach, use another "
    "tool, or tell the user what is blocking you.]"
)


@dataclass(frozen=True, slots=True)
class Loop:
    name: str
    count: int
    key: str
    """Identifies this loop (its first call), so it is recorded once."""


def call_signature(name: str, arguments: str) -> str:
    return hashlib.sha256(f"{name}\0{arguments}".encode()).hexdigest()


def detect(conversation: Sequence[Message], threshold: int) -> Loop | None:
    """The loop at the end of the current turn, if its newest calls repeat `threshold` times."""
    if threshold <= 0:
        return None
    streak: list[tuple[str, str, str]] = []  # (signature, name, call id), newest first
    for item in reversed(conversation):
        if is_user_turn(item):
            break
        for call in reversed(item.tool_calls):
            signature = call_signature(call.name, call.arguments)
            if streak and streak[0][0] != signature:
                return _loop(streak, threshold)
            streak.append((signature, call.name, call.id))
    return _loop(streak, threshold)


def _loop(streak: list[tuple[str, str, str]], threshold: int) -> Loop | None:
    if len(streak) < threshold:
        return None
    signature, name, first_id = streak[-1]
    return Loop(name=name, count=len(streak), key=f"{signature[:16]}:{first_id}")


def note(loop: Loop) -> Message:
    return Message(
        role="user", text=LOOP_NOTE.format(name=loop.name, count=loop.count), origin="note"
    )
