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
holds taken before its own). Its client may have the answer before they are stored
(a quick upstream), so the session's next turn waits for them, and for the writes
queued behind them (`storing.after_storing`), before it reads the session
(`incoming`): the scaffold it weaves and the plan it keeps are what that turn kept.

    hold = rt.turn_order.hold(turn.key, messages=True)   # a turn's own messages
    await rt.turn_order.incoming(key)                     # the next turn, before it reads

This orders the turns one process serves. Another process (`serve --workers`, a
replica on the same PostgreSQL) may take the session's next turn first: the client
resends the answer with it, and it is stored from there; the late answer then finds
itself stored already and is not appended twice (`Store.append_messages`' `unless_from`).

An answer that took the upstream a while is put off further: the agent's next request
is likely on its way, and storing beside its shaping would share the GIL with it. It is
stored once that request has gone upstream (`TurnOrder.hurry`), when any turn or reader
needs it (`settled` asks for it), or after `ANSWER_GRACE_SECONDS`:

    await release.wanted_within()            # put off; then stored as above

A wait is bounded (`TurnOrder.limit`, `request_wait_seconds`), and so is a hold: one
that is not released within the limit (its release was skipped on some error or
cancellation path) is released then, logged once, so it slows the session's next turn
once at most; it never stops it, nor every later turn of the session.

A crash between the answer and its storing loses that turn alone: the turn in flight
(a client that resends its history brings the answer back with its next request).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("memlane.turns")

MAX_WAIT_SECONDS = 10.0
"""How long a turn waits for its session's earlier answers to be stored before it goes
on without them (storing one takes milliseconds), and how long a hold lasts at most,
unless the runtime sets its own (`request_wait_seconds`)."""

ANSWER_GRACE_SECONDS = 0.1
"""The longest an answer whose client resends it waits before it is stored, unless a turn
needs it first (`Hold.wanted_within`). An agent sends its next request the moment it has
an answer; that request arrives and is shaped within a few milliseconds."""


class Hold:
    """A session's answer (or a turn's own messages) not stored yet; calling it says it is.

    A turn that needs the held answer stored asks for it (`TurnOrder.hurry`): an answer
    whose storing was put off (`wanted_within`) is then stored at once.
    """

    __slots__ = ("_expiry", "_release", "done", "messages", "wanted")

    def __init__(self, release: Callable[[Hold], None], *, messages: bool = False) -> None:
        self._release = release
        self.messages = messages
        """A turn's own messages, not an answer."""
        self.done = asyncio.Event()
        self.wanted = asyncio.Event()
        self._expiry: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        """Stored (or given up on): the turns waiting for it go on. Again: a no-op."""
        if not self.done.is_set():
            self.done.set()
            if self._expiry is not None:
                self._expiry.cancel()
            self._release(self)

    def hurry(self) -> None:
        """A turn needs this stored now."""
        self.wanted.set()

    async def wanted_within(self) -> None:
        """Return once a turn needs this stored, or after `ANSWER_GRACE_SECONDS`.

        Storing an answer is about a millisecond of Python on a worker thread. Started
        the moment the client has its answer, it runs while the client's next request
        is being shaped on the event loop, and the two take turns at the GIL: that
        request waited for it (+1.2 ms p50 side by side, `benchmarks/next_turn_ab.py`).
        Put off until that request has gone upstream, it runs while the upstream works.
        """
        if self.wanted.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ANSWER_GRACE_SECONDS):
                await self.wanted.wait()


class TurnOrder:
    """The answers being stored, per session key, in one process (its event loop)."""

    def __init__(self, limit: float = MAX_WAIT_SECONDS) -> None:
        self._held: defaultdict[str, set[Hold]] = defaultdict(set)
        self.holding = 0
        """How many answers are waiting to be stored (turns' own messages are not counted)."""
        self.limit = limit
        """Seconds a wait lasts at most, and a hold."""
        self.expired = 0
        """Holds released by their expiry, not by their owner (each one a bug's trace)."""

    def hold(self, key: str, *, messages: bool = False) -> Hold:
        """Mark `key`'s answer (`messages`: a turn's own messages) as not stored yet; call
        the result once it is (again: a no-op). Not called within `limit`, it is called
        then (`Hold` says why)."""
        held = self._held[key]
        counted = 0 if messages else 1
        self.holding += counted

        def release(hold: Hold) -> None:
            self.holding -= counted
            held.discard(hold)
            if not held and self._held.get(key) is held:
                del self._held[key]

        hold = Hold(release, messages=messages)
        held.add(hold)
        hold._expiry = asyncio.get_running_loop().call_later(self.limit, self._expire, key, hold)
        return hold

    def _expire(self, key: str, hold: Hold) -> None:
        if hold.done.is_set():
            return
        self.expired += 1
        what = "its messages" if hold.messages else "its answer"
        log.warning(
            "a turn of session %s held its session for %s for %.0f s without releasing it; "
            "released",
            key[:8],
            what,
            self.limit,
        )
        hold()

    def incoming(self, key: str) -> Coroutine[Any, Any, bool] | None:
        """Once the messages of `key`'s turns in hand are stored, or None when none are
        being stored (nothing to await: the usual case). The answers they are stored
        behind are asked for; answers held after them are not waited for."""
        held = self._held.get(key)
        if not held or not any(hold.messages for hold in held):
            return None
        for hold in held:
            hold.hurry()
        return self._wait([hold.done for hold in held if hold.messages], key)

    def hurry(self, key: str | None = None) -> None:
        """The answers held for `key` (None: every session) are needed now: those whose
        storing was put off are stored at once."""
        for hold in self._holds(key):
            hold.hurry()

    async def settled(self, key: str | None = None) -> bool:
        """Once the answers held for `key` (None: for every session) are stored; False when
        the wait gave up on them (`limit`)."""
        return await self.behind(key)

    def behind(self, key: str | None = None, *, hurry: bool = True) -> Coroutine[Any, Any, bool]:
        """`settled`, for the holds taken so far only: a turn that holds its session
        itself waits for the turns before it, never for itself. Without `hurry`, an
        answer whose storing was put off is not asked for (the caller asks later)."""
        waiting = self._holds(key)
        if hurry:
            for hold in waiting:
                hold.hurry()
        return self._wait([hold.done for hold in waiting], key)

    def _holds(self, key: str | None) -> list[Hold]:
        if key is None:
            return [hold for held in self._held.values() for hold in held]
        return list(self._held.get(key, ()))

    async def _wait(self, waiting: list[asyncio.Event], key: str | None) -> bool:
        """True once every event is set; False when `limit` passed first (a request's
        caller records that: `engine.waits`)."""
        if not waiting:
            return True
        try:
            async with asyncio.timeout(self.limit):
                for event in waiting:
                    await event.wait()
        except TimeoutError:
            log.debug("an earlier turn of session %s was not stored in time", (key or "*")[:8])
            return False
        return True
