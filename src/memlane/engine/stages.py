"""How long each stage of a turn took: what memlane adds to a request, shown to its client.

The proxy sends the stages back as a `Server-Timing` header, so a user (or a browser's
network panel, or `curl -i`) sees memlane's own cost on every answer without a profiler:
`memlane-wait;dur=0.02, memlane-shape;dur=0.91, …, memlane-upstream;dur=301.20`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class StageClock:
    """Milliseconds per stage, each measured from the end of the one before (the first
    from the clock's start: the turn's)."""

    last: float = field(default_factory=time.perf_counter)
    stages: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, name: str) -> None:
        """The stage `name` has just ended."""
        now = time.perf_counter()
        self.stages.append((name, (now - self.last) * 1000))
        self.last = now

    def took(self, name: str) -> float:
        """Milliseconds the stage `name` took (0 when it has not ended)."""
        return next((ms for stage, ms in self.stages if stage == name), 0.0)
