"""memlane's own calls to an OpenAI-compatible LLM (summaries, facts, metadata)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class LLMError(Exception):
    """The LLM could not be reached or refused: the caller falls back, it never crashes."""


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLM(Protocol):
    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        """One chat completion with no tools. Raises `LLMError` on any failure."""
        ...
