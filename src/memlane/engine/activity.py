"""What this process has done lately: requests and errors per minute, the last extraction.

`memlane status` shows it, so a user can tell whether memory is working without
reading logs. Kept in memory only (a process's own recent history); the store
holds what must outlive it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

WINDOW_SECONDS = 3600
BUCKET_SECONDS = 60


@dataclass
class _Bucket:
    minute: int
    requests: int = 0
    errors: int = 0


@dataclass
class Activity:
    """Counters over the last hour, in one-minute buckets; safe to call from any thread."""

    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _buckets: deque[_Bucket] = field(default_factory=deque)
    _last_extraction: dict[str, Any] | None = None
    _failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, status: int, *, now: float | None = None) -> None:
        """One answered request; a status of 500 or more counts as an error."""
        minute = int((time.time() if now is None else now) // BUCKET_SECONDS)
        with self._lock:
            if not self._buckets or self._buckets[-1].minute != minute:
                self._buckets.append(_Bucket(minute))
                self._trim(minute)
            bucket = self._buckets[-1]
            bucket.requests += 1
            bucket.errors += status >= 500

    def extraction(self, *, ok: bool, detail: str, session_id: str) -> None:
        with self._lock:
            self._last_extraction = {
                "at": datetime.now(UTC).isoformat(),
                "ok": ok,
                "detail": detail,
                "session_id": session_id,
            }

    def failure(self, stage: str, detail: str) -> None:
        """A best-effort stage that was skipped: counted per stage, the last reason kept."""
        with self._lock:
            entry = self._failures.setdefault(stage, {"count": 0})
            entry["count"] += 1
            entry["last"] = detail
            entry["at"] = datetime.now(UTC).isoformat()

    def snapshot(self, *, now: float | None = None) -> dict[str, Any]:
        current = time.time() if now is None else now
        oldest = int(current // BUCKET_SECONDS) - WINDOW_SECONDS // BUCKET_SECONDS
        with self._lock:
            recent = [b for b in self._buckets if b.minute > oldest]
            last = dict(self._last_extraction) if self._last_extraction else None
            failures = {stage: dict(entry) for stage, entry in self._failures.items()}
        return {
            "started_at": self.started_at.isoformat(),
            "uptime_seconds": int(current - self.started_at.timestamp()),
            "requests_last_hour": sum(b.requests for b in recent),
            "errors_last_hour": sum(b.errors for b in recent),
            "last_extraction": last,
            "failures": failures,
        }

    def _trim(self, minute: int) -> None:
        oldest = minute - WINDOW_SECONDS // BUCKET_SECONDS
        while self._buckets and self._buckets[0].minute <= oldest:
            self._buckets.popleft()
