"""Sessions whose memory work failed in this process, and when to try them again.

A batch's job can fail midway (the store or the memory folder refused a write, a disk
filled up). Its turns stay past their session's mark (`engine.memory.marks`), so they
are not lost, but two things must follow:

- the session's later batches must not move the mark past them: where a process
  takes every turn of its sessions in order (`Runtime.serves_alone`), a batch's job
  moves the mark past its last turn at once, which after a failure would skip the
  failed turns for good. A session that failed here records its turns instead
  (`marks.record_done`), which moves the mark only past turns that are all done;
- the failed turns must be done while the process runs, not only at its next start
  (`engine.memory.resume`): after a pause (`RETRY_SECONDS`), the session's turns
  past its mark are read again from the store (`turn_input.Reread`). Past the last
  pause they wait for the next start, and the log says so.

Nothing here holds a task while it waits (a timer on the loop), so an outage over many
sessions never fills the background queue with sleepers.
"""

from __future__ import annotations

import weakref

from memlane.engine.background import Background

RETRY_SECONDS = (10.0, 60.0, 300.0)
"""The pauses before a failed session's turns are tried again, one per failure in a row."""


class Failures:
    """Per session, the failures in a row of its memory work in this process."""

    def __init__(self) -> None:
        self._in_a_row: dict[str, int] = {}

    def failed_here(self, session_id: str) -> bool:
        """Whether a job of the session ever failed in this process: its later jobs record
        their turns rather than move the mark past them."""
        return session_id in self._in_a_row

    def note_failure(self, session_id: str) -> float | None:
        """The pause before the session is tried again; None when its failures in a row
        are past `RETRY_SECONDS` (its turns wait for the next start)."""
        count = self._in_a_row.get(session_id, 0)
        self._in_a_row[session_id] = count + 1
        return RETRY_SECONDS[count] if count < len(RETRY_SECONDS) else None

    def note_success(self, session_id: str) -> None:
        """A job of the session did its work: a next failure gets the first pause again.
        The session stays known as failed here (its mark may still wait on a failed turn)."""
        if session_id in self._in_a_row:
            self._in_a_row[session_id] = 0


_FAILURES: weakref.WeakKeyDictionary[Background, Failures] = weakref.WeakKeyDictionary()


def failures(background: Background) -> Failures:
    """The failures kept for one runtime (its background queue)."""
    found = _FAILURES.get(background)
    if found is None:
        found = _FAILURES[background] = Failures()
    return found
