"""A new session's row is written behind its first request, not in front of it.

Creating the row was the one write in front of a new session's request: a worker-thread
trip, and under the previous sessions' background writes a wait for SQLite's write lock.
Nothing the forwarded request holds depends on the row, so the session is *made ahead*,
in memory, with the id its row will get (`SessionsAhead.made`), and the request is
shaped from it like a session that exists (on the event loop, `pipeline.reads_here`).
The row is written first among the turn's writes, while the request is upstream
(`pipeline._store_behind`); every other write of the turn waits for those
(`pipeline.stored`, `storing.after_storing`), and so does the session's next turn
(`TurnOrder.incoming`).

A second turn of the new session in this process reads it once that store is done;
should its wait give up (`TurnOrder.limit`), the two share the session made
ahead until its row is written: the entry is forgotten on the event loop once the row is
there, so a turn that found no row (it reads on the loop too) finds the entry instead. Another
process that creates the same key first wins: the turn adopts that row (`write`), and
the writes it queued under the id made ahead fail open (recorded, not raised).
"""

from __future__ import annotations

import logging
import uuid

from memlane.store import Store
from memlane.store.codec import now
from memlane.types import Session

log = logging.getLogger("memlane.sessions")


class SessionsAhead:
    """The sessions this process made ahead of their rows, by tenant and key. Used from
    the event loop only (`write` runs anywhere: it does not touch the entries)."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Session] = {}

    def made(self, key: str, *, namespace: str, tenant: str) -> Session:
        """The session made ahead for `key` in `tenant`, made now if there is none."""
        found = self._made.get((tenant, key))
        if found is None:
            stamp = now()
            found = Session(
                id=uuid.uuid4().hex,
                key=key,
                namespace=namespace,
                created_at=stamp,
                updated_at=stamp,
                tenant=tenant,
            )
            self._made[(tenant, key)] = found
        return found

    def forget(self, session: Session) -> None:
        """Once its row is written (or could not be): a later turn reads the row."""
        if self._made.get((session.tenant, session.key)) is session:
            del self._made[(session.tenant, session.key)]

    def __len__(self) -> int:
        return len(self._made)

    @staticmethod
    def write(store: Store, session: Session) -> Session:
        """Its row, written now; the row another process wrote first, if one did."""
        row = store.ensure_session(
            session.key, namespace=session.namespace, tenant=session.tenant, session_id=session.id
        )
        if row.id != session.id:
            log.info("session %s was created by another process first", session.key[:8])
        return row
