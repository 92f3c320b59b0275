"""Repeated warnings, once per burst: a down LLM must not print a line per request.

With the summary or extraction model unreachable, every turn's background work
warns the same thing. The proxy's log handler lets the first warning of a kind
(its logger and message template) through, holds back the repeats for `every`
seconds, and says how many it held back on the next one it prints. Errors and
info lines always pass; the access log limits its own warnings per route.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

EVERY = 10.0
OWN_LIMIT = ("memlane.access",)
"""Loggers that limit their warnings themselves (per route and status)."""


class RepeatedWarnings(logging.Filter):
    def __init__(self, every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or record.name in OWN_LIMIT:
            return True
        key = (record.name, str(record.msg))
        now = self.clock()
        last, held = self._seen.get(key, (-math.inf, 0))
        if now - last < self.every:
            self._seen[key] = (last, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like it held back)"
        return True
