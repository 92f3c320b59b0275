"""At start-up, queue again the memory work a stop or a crash left undone.

Every stored turn at or past its session's mark (`engine.memory.marks`) whose answer
is stored is re-derived from the store (`engine.memory.rederive`) and queued like a
finished turn (`ingest.queue`); its batch's job moves the mark on. Only what is
missing is done, once the start-up catch-up has indexed the entries a stop left in
their files alone.
"""

from __future__ import annotations

import logging
from datetime import datetime

from memlane.engine import threads
from memlane.engine.memory import marks
from memlane.engine.memory.ingest import queue
from memlane.engine.memory.rederive import pending_turns
from memlane.engine.runtime import Runtime

__all__ = ["pending_turns", "resume"]

log = logging.getLogger("memlane.memory")


async def resume(rt: Runtime, *, before: datetime | None = None) -> int:
    """Queue the memory work of every stored turn not remembered yet; how many turns.
    Once per home (the primary process). `before`: when this process started; a turn
    it stored since is remembered by its own request (`pipeline.finish`), and resuming
    it too would do its work twice."""
    if not marks.wanted(rt.settings) or not rt.primary:
        return 0
    # Entries a stop left in their files alone are indexed by the start-up catch-up:
    # read before it, their turns would look unwritten and be written twice.
    await rt.memory_book.ready()
    items = await threads.to_thread(pending_turns, rt, before)
    for item in items:
        queue(rt, item)
    if items:
        sessions = len({item.session_id for item in items})
        log.info("resumed the memory work of %d turn(s) in %d session(s)", len(items), sessions)
    return len(items)
