"""A session's turns are stored in order, even when an answer is stored after the client has it.

Storing an answer takes a millisecond or more (its rows, its index documents, its
record). The proxy stores it once the client has the answer in hand instead of in
front of the last byte, so that time never adds to the request. The one thing that
must not see the session without that answer is the session's next turn (its
messages are matched against the stored ones), so a turn that is about to be
released to its client *holds* its session, and the next turn of that session
waits until the hold is released:

    release = rt.turn_order.hold(turn.key)   # before the client can see the end
    ...                                      # the client gets its answer
    await pipeline.finish(rt, turn, answer)  # then the answer is stored
    release()

    await rt.turn_order.settled(key)         # the next turn, before it reads the session

A turn's own messages are stored the same way, while its request is on its way
upstream (`pipeline.prepare`): the turn holds its session until they are, and
stores them once the turns before it are stored (`behind`, which waits for the
holds taken before its own).

This orders the turns one process serves. Another process (`serve --workers`, a
replica on the same PostgreSQL) may take the session's next turn first: the client
resends the answer with it, and it is stored from there; the late answer then finds
itself stored already and is not appended twice (`Store.append_messages`' `unless_from`).

A wait is bounded (`MAX_WAIT_SECONDS`): a hold that is never released (a bug) slows
the session's next turn once; it never stops it. A crash between the answer and its
storing loses that turn alone: the turn in flight (a client that resends its history
brings the answer back with its next request).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("memlane.turns")

MAX_WAIT_SECONDS = 5.0
"""How long a turn waits for its session's earlier answers to be stored before it goes
on without them (storing one takes milliseconds)."""


class TurnOrder:
    """The answers being stored, per session key, in one process (its event loop)."""

    def __init__(self) -> None:
        self._held: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self.holding = 0
        """How many answers are waiting to be stored."""

    def hold(self, key: str) -> Callable[[], None]:
        """Mark `key`'s answer as not stored yet; call the result once it is (again: no-op)."""
        done = asyncio.Event()
        held = self._held[key]
        held.add(done)
        self.holding += 1

        def release() -> None:
            if done.is_set():
                return
            done.set()
            self.holding -= 1
            held.discard(done)
            if not held and self._held.get(key) is held:
                del self._held[key]

        return release

    async def settled(self, key: str | None = None) -> None:
        """Once the answers held for `key` (None: for every session) are stored."""
        await self.behind(key)

    def behind(self, key: str | None = None) -> Coroutine[Any, Any, None]:
        """`settled`, for the holds taken so far only: a turn that holds its session
        itself waits for the turns before it, never for itself."""
        if key is None:
            waiting = [event for held in self._held.values() for event in held]
        else:
            waiting = list(self._held.get(key, ()))
        return self._wait(waiting, key)

    async def _wait(self, waiting: list[asyncio.Event], key: str | None) -> None:
        if not waiting:
            return
        try:
            async with asyncio.timeout(MAX_WAIT_SECONDS):
                for event in waiting:
                    await event.wait()
        except TimeoutError:
            log.warning(
                "an earlier answer of session %s was not stored within %.0f s; going on",
                (key or "*")[:8],
                MAX_WAIT_SECONDS,
            )
