"""A conversation's recall search, reused while its tool loop asks the same question.

An agent answers one user message in a loop of requests (a tool call, its result, the
next call), and each of them carries that message as its last user message: the
question recall searches for (`Turn.user_text`). Under 200 clients the search was 31% of
the event loop's samples (py-spy, `load.py`), and in a tool loop every step ran it
again for the same question. So each conversation's last search is kept, and a request
asking the same question of the same scopes within `memory_recall_reuse_seconds` of it
takes its hits instead of searching.

What is kept is a ranked list, not what a request is shown: each request still picks
from it what its own messages do not already say, and reads those entries from the
store; an entry deleted or changed since the search makes that request search anew
(`recall._drifted`), so a memory forgotten during a tool loop is not injected again.
What was remembered meanwhile is found at the next question, or once the reuse window
has passed: within one tool loop, mostly the loop's own turns, which its request holds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.search import Query

KEPT_SEARCHES = 256
"""Conversations whose last search is kept at most (the oldest search goes first)..."""
KEPT_CHARS = 8_000_000
"""...and the characters their hits' texts hold together at most (a remembered turn can
be 64,000 characters long: 256 searches of such turns would hold hundreds of MB)."""

Asked = tuple[Any, ...]
"""What of a search decides its hits (`asked`)."""


def asked(query: Query) -> Asked:
    """A search as the reuse compares it: its question and filter, not its moment (a search
    of facts true now asks at a new `valid_at` each request) nor its size (`SearchReuse.get`)."""
    flt = query.flt
    return (
        query.text,
        flt.kinds,
        flt.scopes,
        flt.session_id,
        flt.fact_roles,
        flt.turns_left_out,
        flt.valid_at is None,
    )


@dataclass(frozen=True, slots=True)
class _Kept:
    asked: Asked
    k: int
    hits: list[Candidate]
    until: float
    chars: int


class SearchReuse:
    """Each conversation's last recall search, kept for a while (thread-safe: a request's
    search runs on the event loop or in a worker thread)."""

    def __init__(self, size: int = KEPT_SEARCHES, chars: int = KEPT_CHARS) -> None:
        self.size = size
        self.chars = chars
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._held = 0
        """Characters of the kept hits' texts."""
        self._lock = threading.Lock()

    def get(self, session_id: str, query: Query) -> list[Candidate] | None:
        """The hits of the conversation's last search if it asked what `query` asks, for
        at least as many (a request skips the memories its messages already say, so a
        conversation's first requests, holding few messages, ask for fewer), and has not
        expired; None otherwise."""
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            kept = self._kept.get(session_id)
            if kept is None or kept.until <= now:
                return None
            return kept.hits if kept.asked == asked(query) and kept.k >= query.k else None

    def put(self, session_id: str, query: Query, hits: list[Candidate], seconds: float) -> None:
        """Keep a search's hits for `seconds` (its conversation's earlier one is replaced)."""
        now = time.monotonic()
        chars = sum(len(hit.text) for hit in hits)
        with self._lock:
            self._drop(session_id)  # in order of being kept: the oldest expires first
            self._kept[session_id] = _Kept(asked(query), query.k, hits, now + seconds, chars)
            self._held += chars
            self._expire(now)
            while len(self._kept) > self.size or self._held > self.chars:
                self._drop(next(iter(self._kept)))

    def forget(self) -> None:
        """Drop every kept search: a person deleted a session or a memory, whose words a
        kept hit may hold (it would not be injected, `recall._drifted`, but deleted means
        gone from memory too)."""
        with self._lock:
            self._kept.clear()
            self._held = 0

    def __len__(self) -> int:
        return len(self._kept)

    def _expire(self, now: float) -> None:
        kept = self._kept
        while kept and next(iter(kept.values())).until <= now:
            self._drop(next(iter(kept)))

    def _drop(self, session_id: str) -> None:
        gone = self._kept.pop(session_id, None)
        if gone is not None:
            self._held -= gone.chars


SEARCHES = SearchReuse()
"""This process's kept searches (one per process, like the other request-path memos)."""
