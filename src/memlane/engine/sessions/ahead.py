"""A new session's row is written behind its first request, not in front of it.

Nothing the forwarded request holds depends on the row, so a new session is *made
ahead*, in memory, with the id its row will get (`made_session`), and the request is
shaped from it like a session that exists. The row is written first among the turn's
writes (`write_made`, in `turn_store.store_with`), in the store's writer; every later
write of the turn, and the session's next turn, come after it (`engine.writes`).

Another turn or process that creates the same key first wins: the turn adopts that row,
and the writes it queued after it use the row's id (they read `Turn.session` when they
run).
"""

from __future__ import annotations

import logging
import uuid

from memlane.store import Store
from memlane.store.codec import now
from memlane.types import Session

log = logging.getLogger("memlane.sessions")


def made_session(key: str, namespace: str, tenant: str) -> Session:
    """A new session for `key` in `tenant`, in memory only."""
    stamp = now()
    return Session(
        id=uuid.uuid4().hex,
        key=key,
        namespace=namespace,
        created_at=stamp,
        updated_at=stamp,
        tenant=tenant,
    )


def write_made(store: Store, session: Session) -> Session:
    """Its row, written now; the row another turn or process wrote first, if one did."""
    row = store.ensure_session(
        session.key, namespace=session.namespace, tenant=session.tenant, session_id=session.id
    )
    if row.id != session.id:
        log.info("session %s was created elsewhere first", session.key[:8])
    return row
