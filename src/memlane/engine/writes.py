"""The request path's writes: queued to the store's writer, in order, per session.

A turn reads what its session's earlier turns stored (their messages, the scaffold's
state, governance's plan), so before it reads it waits for the last write queued for
its session (`before_reading`): usually committed long before, since an agent's next
request follows the answer that came after it. That answer itself, when the client
resends it (`read_next=False`), is something the next request carries and reads
nothing of: while it is all the writer has to do, the next turn is shaped as it
commits (one client's growing history waited 1.8-2.0 ms p50 for it, its whole batch).
Everything else is a queue: a turn's messages, what its scaffold and governance keep,
its answer and its record are queued to one writer thread per store
(`store.group_commit`), in the order the turn makes them, and committed in batches
with every other request's. Only a caller that needs to know a write is durable (an
answer its client will not resend) awaits it.

    await rt.writes.before_reading(turn.session_of)  # before the turn reads its session
    turn.storing = rt.writes.queue(turn.session_of, store_the_messages)
    ...
    stored = rt.writes.queue(turn.session_of, store_the_answer, read_next=False)  # resent

A wait is bounded (`limit`, `request_wait_seconds`): a turn whose session's writes are
stuck goes on without them, and says so (`engine.waits`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from memlane.engine import threads
from memlane.engine.signals import leave_signals_to_the_main_thread
from memlane.store import Store
from memlane.store.group_commit import GroupCommit

T = TypeVar("T")

SessionOf = tuple[str, str]
"""A session as the write queue knows it: (tenant, key)."""

DEFAULT_LIMIT_SECONDS = 10.0


class Writes:
    """One store's write queue, as the event loop sees it."""

    def __init__(self, store: Store, *, limit: float = DEFAULT_LIMIT_SECONDS) -> None:
        self.limit = limit
        self.writer = GroupCommit(store, initializer=leave_signals_to_the_main_thread)
        self._last: dict[SessionOf, asyncio.Future[Any]] = {}
        """Each session's last write queued."""
        self._read: dict[SessionOf, asyncio.Future[Any]] = {}
        """Each session's last write queued that its next turn reads (`read_next`)."""
        self._latest: asyncio.Future[Any] | None = None
        self._pending = 0
        """Writes queued and not done yet, every session's."""

    def queue(
        self,
        session: SessionOf | None,
        write: Callable[[], T],
        *,
        failed: Callable[[], None] | None = None,
        awaited: bool = False,
        linger: bool = False,
        read_next: bool = True,
    ) -> asyncio.Future[T]:
        """Queue `write`; its result (or error) arrives in the returned future, which
        need not be awaited. `session`'s next turn waits for it before it reads.
        `failed` is called in the writer when the write did not commit (before any later
        write runs: one that depends on it reads what it says). `awaited`: the caller
        waits for it, so its batch starts now (`GroupCommit.hurry`); `linger`: queued while
        its request is still being prepared, so its batch may wait a moment;
        `read_next`: the session's next turn reads what it stores, so it waits for it
        (False: it does not, yet the writes it queues still come after this one)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        future.add_done_callback(threads.retrieved)

        told = False

        def guarded() -> T:
            nonlocal told
            try:
                return write()
            except BaseException:
                if failed is not None:  # at once: a later write of its batch reads it
                    told = True
                    failed()
                raise

        def done(value: Any, error: BaseException | None) -> None:
            if error is not None and failed is not None and not told:  # its commit failed
                failed()
            threads.post(loop, future, value, error)

        self.writer.submit(guarded if failed is not None else write, done, linger=linger)
        if awaited:
            self.writer.hurry()
        self._latest = future
        self._pending += 1
        future.add_done_callback(self._done)
        if session is not None:
            _keep(self._last, session, future)
            if read_next:
                _keep(self._read, session, future)
        return future

    async def settled(self, session: SessionOf | None = None) -> bool:
        """Once the writes queued so far for `session` (None: for every session) are
        committed or failed; False when that took longer than `limit`."""
        return await self._settled(self._latest if session is None else self._last.get(session))

    async def before_reading(self, session: SessionOf, limit: float | None = None) -> bool:
        """`settled` for a turn about to read its session: the writes it reads (not an
        answer its client resends) when nothing else waits for the writer, else every write
        of the session. Not waiting for the answer under 200 clients served 10-30% fewer
        requests at more CPU each in ten of eleven paired runs (`load.py`), while one
        client gained 1.2-1.6 ms p50: the wait keeps busy clients in step with the
        writer. `limit`: what is left of the request's wait, when less than `self.limit`."""
        kept = self._read if self._pending <= 1 else self._last
        return await self._settled(kept.get(session), limit)

    async def _settled(self, last: asyncio.Future[Any] | None, limit: float | None = None) -> bool:
        if last is None:
            return True
        if last.done():  # its callbacks (the turn's background work) are queued: they go first
            await asyncio.sleep(0)
            return True
        self.writer.hurry()
        timeout = self.limit if limit is None else min(limit, self.limit)
        done, _ = await asyncio.wait([last], timeout=timeout)
        return bool(done)

    @property
    def pending(self) -> int:
        """Writes queued and not committed (or failed) yet, every session's."""
        return self._pending

    def _done(self, _: asyncio.Future[Any]) -> None:
        self._pending -= 1

    def close(self, timeout: float | None = None) -> bool:
        """Commit what is queued, then stop the writer (a graceful stop)."""
        return self.writer.close(timeout)


def _keep(
    kept: dict[SessionOf, asyncio.Future[Any]], session: SessionOf, future: asyncio.Future[Any]
) -> None:
    """`future` as `session`'s last in `kept`, until it is done (unless a later one is)."""
    kept[session] = future

    def forget(done: asyncio.Future[Any]) -> None:
        if kept.get(session) is done:
            del kept[session]

    future.add_done_callback(forget)
