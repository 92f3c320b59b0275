"""How soon clients send a session's next request once they have its answer.

A client that resends its history may have an answer before its turn is stored
(`proxy.turns`): the session's next turn then waits for that store in front
(`TurnOrder.incoming`). That pays when the client takes a while before its next request
(it reads the answer, runs a tool): the store is done by then, and the answer came
sooner. It does not when the client asks again at once: the next turn waits for
what the answer's end used to wait for, and a next turn sent the instant its first
answer arrived read +9.6 ms p50 instead of +5.0 (`next_turn_ab.py`, instant upstream).
So the proxy watches the pause between a session's answer and its next request, and
lets answers go ahead of their store only while clients pause long enough.
"""

from __future__ import annotations

import statistics
import time
from collections import OrderedDict, deque

UNHURRIED_MS = 10.0
"""The pause (median of the recent ones) from which clients are taken to come back after
a turn is stored: storing a new session's 20 messages takes about 6 ms."""

PAUSES_KEPT = 8
"""How many recent pauses the median is taken over."""

ANSWERS_KEPT = 1024
"""Sessions whose answer time is remembered until their next request (the oldest is
forgotten first: a session that never comes back must not grow the table)."""


class ClientPace:
    """The recent pauses between an answer and its session's next request (one process)."""

    def __init__(self) -> None:
        self._answered: OrderedDict[str, float] = OrderedDict()
        self._pauses: deque[float] = deque(maxlen=PAUSES_KEPT)

    def answered(self, key: str) -> None:
        """The client of session `key` has its answer now."""
        self._answered[key] = time.monotonic()
        self._answered.move_to_end(key)
        if len(self._answered) > ANSWERS_KEPT:
            self._answered.popitem(last=False)

    def arrived(self, key: str) -> None:
        """Session `key`'s next request arrived: how long its client paused is learnt."""
        answered = self._answered.pop(key, None)
        if answered is not None:
            self._pauses.append((time.monotonic() - answered) * 1000)

    @property
    def unhurried(self) -> bool:
        """Whether clients have lately paused long enough for a turn to be stored before
        their next request (or none came back yet)."""
        return not self._pauses or statistics.median(self._pauses) >= UNHURRIED_MS
