"""Counting tokens the way the model will.

Implementation: see the text-layer issue. The protocol is the seam governance uses.
"""

from __future__ import annotations

from typing import Protocol

from memlane.types import Message


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int:
        """Tokens a message costs in a request, including per-message framing."""
        ...
