"""Settings owned by context governance: keep every request inside the model's window.

All budgets are in tokens of the request's model (counted with the real
tokenizer), expressed against the usable window: the model's context window
minus the safety margin reserved for the answer. Every knob has a disable
value, listed in its description (one table of disable values): 0 turns a pass
off, `governance_enabled=false` forwards requests untouched.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from memlane.config.fields import Fraction, NonNegativeInt, ProperFraction, SettingsPart


class GovernanceSettings(SettingsPart):
    governance_enabled: bool = True
    """Keep requests inside the model's window (mask, compact, recall, pre-flight). false: forward
    every request untouched."""

    governance_context_windows: dict[str, int] = Field(default={})
    """Context window per model, overriding the built-in table and learned values; a key matches the
    model name or its prefix (`llama3=8192,gpt-4o=128000`, or a TOML table). Empty: the table, then
    what the upstream taught."""

    governance_default_window: Annotated[int, Field(ge=1_024)] = 131_072
    """Window assumed for a model neither configured, listed by the upstream, known nor learned
    (128k: generous, so a real client is never compacted early; an overflow error teaches the real
    one). Such a request is compacted to fit it but never refused before the upstream answers."""

    governance_defer_to_clients: bool = True
    """Clients that compact their own history (Codex CLI, Claude Code) do so first: memlane compacts
    their requests only when they would not fit the window at all. false: memlane's threshold
    applies to them too."""

    governance_safety_margin: NonNegativeInt = 4_096
    """Tokens reserved for the answer (capped at a quarter of the window). 0: none."""

    governance_compact_threshold: Fraction = 0.8
    """Share of the usable window that triggers a compaction. 0: never compact (the pre-flight check
    still runs)."""

    governance_compact_target: ProperFraction = 0.5
    """Share of the usable window a compaction brings the request down to; well below the threshold,
    so the following requests only append (prompt caches hit)."""

    governance_tail_share: ProperFraction = 0.3
    """Share of the usable window kept verbatim as the recent tail."""

    governance_tool_output_limit: NonNegativeInt = 2_000
    """Tool results larger than this (tokens), outside the protection window, are offloaded to the
    session folder and replaced by a head + tail preview. 0: never mask."""

    governance_protect_tokens: NonNegativeInt = 20_000
    """Newest tokens whose tool results stay verbatim (a result larger than the whole tail is masked
    anyway). 0: no protection."""

    governance_preview_chars: NonNegativeInt = 1_200
    """Characters of a masked tool result kept in the request (two thirds head, one third tail)."""

    governance_summary_max_tokens: Annotated[int, Field(ge=64)] = 1_500
    """Longest state snapshot the summariser may write."""

    governance_summarise: bool = True
    """Summarise the dropped middle with the LLM. false: a static marker saying how many messages
    were removed (dropped history is still recalled)."""

    governance_summary_verify: bool = False
    """Second summariser pass that checks the snapshot against the dropped messages and fills
    omissions (one more LLM call per compaction). false: one pass."""

    governance_loop_threshold: NonNegativeInt = 5
    """The same tool call (name + arguments) this many times in a row is recorded as an event and
    answered with a note to the model. 0: no loop detection."""

    governance_recall_snippets: NonNegativeInt = 8
    """Snippets of dropped history (and long-term memory) injected when a request is trimmed. 0: no
    re-injection."""

    governance_recall_chars: NonNegativeInt = 6_000
    """Characters those snippets may take in total."""

    governance_preflight: bool = True
    """Refuse a request that cannot fit even after governance with a context_length_exceeded error
    instead of forwarding it. false: forward it anyway."""

    @field_validator("governance_context_windows", mode="before")
    @classmethod
    def _parse_windows(cls, value: Any) -> Any:
        """Environment values arrive as text: `model=tokens,…` or a JSON object."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text:
            return {}
        if text.startswith("{"):
            return json.loads(text)
        pairs: dict[str, str] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            model, sep, tokens = part.partition("=")
            if not sep or not model.strip():
                raise ValueError(f"expected model=tokens, got {part.strip()!r}")
            pairs[model.strip()] = tokens.strip()
        return pairs

    @field_validator("governance_context_windows")
    @classmethod
    def _positive_windows(cls, value: dict[str, int]) -> dict[str, int]:
        for model, tokens in value.items():
            if tokens < 1_024:
                raise ValueError(f"window of {model!r} must be at least 1024 tokens")
        return value

    @model_validator(mode="after")
    def _target_below_threshold(self) -> GovernanceSettings:
        threshold = self.governance_compact_threshold
        if threshold and self.governance_compact_target >= threshold:
            raise ValueError("governance_compact_target must be below governance_compact_threshold")
        return self
