"""The compaction plan: what governance does to a session's history, persisted between requests.

Clients resend the whole conversation every turn. Governance does not decide
afresh each time: it keeps a plan ("the first `head` items stay, items up to
`dropped` are replaced by this snapshot, these tool results are masked") and
applies the same plan to every request until the next compaction. The plan
covers a prefix of the conversation, checked by the fingerprint of its last
item, so a request that only appends gets exactly the bytes the previous one
got, plus its new items: provider prompt caches keep hitting.

Indices count the client's own items only (`origin == "client"`); memlane's
injected items (state block, references) are kept wherever the request has
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memlane.types import Message

PLAN_VERSION = 1


@dataclass(frozen=True, slots=True)
class Plan:
    covered: int = 0
    """Client items [0, covered) the plan was made for."""
    anchor: str = ""
    """Fingerprint of item covered-1: a client that rewrote its history invalidates the plan."""
    head: int = 0
    """Items [0, head) stay (masked and stripped of old reasoning)."""
    dropped: int = 0
    """Items [head, dropped) are replaced by the snapshot, except `pinned` ones."""
    pinned: tuple[int, ...] = ()
    """Items inside the dropped span kept verbatim (the current user instruction)."""
    snapshot: str = ""
    """The state snapshot (or static marker) that stands for the dropped items."""
    summarised: int = 0
    """How many dropped items the snapshot accounts for."""
    masked: Mapping[int, str] = field(default_factory=dict)
    """Tool results shown as a preview: index → where the full output is."""
    strip_reasoning: bool = False
    """Reasoning in the head belongs to finished turns and is left out."""
    compactions: int = 0
    loops_noted: tuple[str, ...] = ()
    model: str = ""
    """The model the session last used: manual compaction summarises with it."""

    @property
    def active(self) -> bool:
        return self.dropped > self.head or bool(self.masked)

    @property
    def trims(self) -> bool:
        """Whether requests under this plan miss part of the history (recall applies)."""
        return self.dropped > self.head

    @property
    def version(self) -> str:
        """Names the state of the dropped history: it changes at every compaction (a recall
        answer for the same query and version is the same answer)."""
        return f"{self.covered}:{self.anchor}"

    def dropped_indices(self) -> list[int]:
        pinned = set(self.pinned)
        return [i for i in range(self.head, self.dropped) if i not in pinned]

    def matches(self, conversation: Sequence[Message]) -> bool:
        if self.covered == 0:
            return True
        if len(conversation) < self.covered:
            return False
        return conversation[self.covered - 1].fingerprint() == self.anchor

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "version": PLAN_VERSION,
            "covered": self.covered,
            "anchor": self.anchor,
            "head": self.head,
            "dropped": self.dropped,
            "pinned": list(self.pinned),
            "snapshot": self.snapshot,
            "summarised": self.summarised,
            "masked": {str(k): v for k, v in sorted(self.masked.items())},
            "strip_reasoning": self.strip_reasoning,
            "compactions": self.compactions,
            "loops_noted": list(self.loops_noted),
            "model": self.model,
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Plan:
        """A stored plan; an unreadable or foreign one counts as no plan (never a crash)."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if data.get("version") != PLAN_VERSION:
                return cls()
            return cls(
                covered=int(data["covered"]),
                anchor=str(data["anchor"]),
                head=int(data["head"]),
                dropped=int(data["dropped"]),
                pinned=tuple(int(i) for i in data["pinned"]),
                snapshot=str(data["snapshot"]),
                summarised=int(data["summarised"]),
                masked={int(k): str(v) for k, v in data["masked"].items()},
                strip_reasoning=bool(data["strip_reasoning"]),
                compactions=int(data["compactions"]),
                loops_noted=tuple(str(x) for x in data["loops_noted"]),
                model=str(data.get("model", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def covering(self, conversation: Sequence[Message]) -> Plan:
        """The same plan, re-anchored on the whole conversation it was just applied to."""
        if not conversation:
            return self
        return replace(self, covered=len(conversation), anchor=conversation[-1].fingerprint())
