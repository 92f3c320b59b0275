"""The `MessageLog` role, written once for every SQL backend: messages and events.

A backend supplies `_append` (storing new messages is where each is fastest its
own way); the rest is here: holding a session's history while it is written,
matching a resent history (`store.transcript`), changing a message's status with
its count in step, and events.

A message is not a search document, an event is. Nothing searches a conversation's
messages by word: recall reads remembered turns (facts, written from the messages
with their neighbours' words) and dropped history (events). Indexing each message
as well made an agent's turn with an 8 KB tool result cost half as much CPU again to
store, kept its text a second time on disk, and its words in the keyword index's
memory for good (`docs/concepts/storage.md`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Unpack

from memlane.store.arguments import EventDetails, MessageQuery, TextQuery, Usage
from memlane.store.base import (
    NewEvent,
    NewMessage,
    SessionNotFound,
    StoreError,
    SyncResult,
    check_one_of,
)
from memlane.store.codec import now
from memlane.store.counting import messages_of
from memlane.store.documents import Doc
from memlane.store.rows import (
    EVENT_COLUMNS,
    MESSAGE_COLUMNS,
    Row,
    event_from_row,
    message_from_row,
)
from memlane.store.sessions import count_usage, hold_session
from memlane.store.sql import D, Db, SqlStore, Where, among, select
from memlane.store.transcript import SyncPlan, digested, history_digest, plan_sync
from memlane.types import Event, Message, MessageText, StoredMessage

MESSAGE_STATUSES = ("ok", "failed", "superseded")

_CLIENT_ROWS = "FROM messages WHERE session_id = ? AND origin = 'client' AND status = 'ok'"
CLIENT_HISTORY = f"SELECT id, content_hash {_CLIENT_ROWS} ORDER BY position"
"""The stored client messages a resent history is matched against (`plan_sync`), when
the session's digest of them does not match it (`History.digest`)."""
UNDIGESTED = (
    f"SELECT id, content_hash {_CLIENT_ROWS} AND position >= (SELECT CASE WHEN client_digest "
    "IS NULL THEN 0 ELSE client_digest_end END FROM sessions WHERE id = ?) ORDER BY position"
)
"""The stored client messages the session's digest does not stand for (`History.stored`)."""
_TEXT_COLUMNS = "position, role, kind, origin, text"
"""What `list_message_texts` reads of a message: its stored content is not decoded."""
CLIENT_HASHES = f"SELECT content_hash {_CLIENT_ROWS} ORDER BY position"
"""Their fingerprints alone, in order: what `edit_point` compares, from the same index."""
_NEXT = "(SELECT coalesce(max(position) + 1, 0) FROM messages WHERE session_id = ?) AS next"
STORED_FROM = (
    "SELECT 1 AS found FROM messages WHERE session_id = ? AND position >= ? "
    "AND origin = 'client' AND status = 'ok' AND content_hash = ? LIMIT 1"
)
"""Whether a client stored a message (its content hash) at a position or later."""


@dataclass(frozen=True, slots=True)
class History:
    """A session's history as its writer holds it."""

    session_id: str
    next_position: int
    """The next free position; it stays free until the transaction ends."""
    digest: str | None = None
    """`transcript.history_digest` of the stored client messages before the position the
    session keeps with it (`client_digest_end`); None when unknown (a session stored
    before it was kept, a fork, a message whose status changed since)."""
    stored: list[tuple[int, str]] = field(default_factory=list)
    """(id, content hash) of the stored client messages in `ok` status the digest does
    not stand for (all of them without one), in order: an answer, most turns."""
    found: bool = False
    """Whether the message `hold_history` was asked about (`unless`) is stored."""


def hold_history(
    db: Db,
    session_id: str,
    *,
    with_stored: bool = False,
    unless: tuple[int, str] | None = None,
) -> History:
    """Take the session's row for this transaction: one writer of its history at a time.

    Where the row is locked (`db.lock`), the reads of other rows are separate statements
    after the locking one, because a statement's snapshot predates its wait for the lock
    (the locked row itself is read as the lock found it); sent together, they still cost
    one round trip where the backend can pipeline them. Where the transaction holds the
    whole store since it began (SQLite), one statement reads the session and its next
    position. `with_stored`: also read the stored client messages its digest does not
    stand for (`History.stored`). `unless` (position, content hash): also read whether a
    client stored that message (in `ok` status) at that position or later
    (`History.found`).
    """
    statements: list[tuple[str, Sequence[Any]]]
    if db.lock:
        statements = [
            (f"SELECT id, client_digest FROM sessions WHERE id = ?{db.lock}", [session_id]),
            (f"SELECT {_NEXT}", [session_id]),
        ]
    else:
        statements = [
            (f"SELECT id, client_digest, {_NEXT} FROM sessions WHERE id = ?", [session_id] * 2)
        ]
    if with_stored:
        statements.append((UNDIGESTED, [session_id] * 2))
    if unless is not None:
        statements.append((STORED_FROM, [session_id, *unless]))
    session, *more = db.reads(*statements)
    if not session:
        raise SessionNotFound(f"no session with id {session_id}")
    position = (more.pop(0) if db.lock else session)[0]["next"]
    return History(
        session_id=session_id,
        next_position=int(position),
        digest=session[0]["client_digest"],
        stored=[(int(r["id"]), r["content_hash"]) for r in more[0]] if with_stored else [],
        found=bool(more[-1]) if unless is not None else False,
    )


def _plan_sync(
    db: Db, history: History, hashes: list[str]
) -> tuple[SyncPlan, list[int], list[str]]:
    """How a resent history (its fingerprints, `hashes`) meets the stored one: the plan,
    the ids of the stored messages it supersedes, and the fingerprints of the stored ones
    it keeps. The usual turn, the stored history then something new, hashes what the
    session's digest stands for and reads only what was stored after; anything else
    reads the whole stored history."""
    base = digested(history.digest, hashes)
    if base is None:
        base = 0
        ids, stored = client_history(db, history.session_id)
    else:
        ids = [message_id for message_id, _ in history.stored]
        stored = [*hashes[:base], *(h for _, h in history.stored)]
    plan = plan_sync(stored, hashes)
    if plan.supersede_from is None:
        return plan, [], stored
    return plan, ids[plan.supersede_from - base :], stored[: plan.matched]


def client_history(db: Db, session_id: str) -> tuple[list[int], list[str]]:
    """The ids and content hashes of the session's stored client messages, in order."""
    rows = db.all(CLIENT_HISTORY, session_id)
    return [int(r["id"]) for r in rows], [r["content_hash"] for r in rows]


def client_hashes(items: Sequence[NewMessage], hashes: Sequence[str]) -> list[str]:
    """The fingerprints (`hashes`, in step with `items`) of the clients' items."""
    return [h for item, h in zip(items, hashes, strict=True) if item.message.origin == "client"]


def digest_end(history: History, items: Sequence[NewMessage], digest: str | None) -> int | None:
    """Where the client history `digest` stands for ends once `items` are appended (None
    with no digest: `_append` leaves the session's as they are)."""
    return None if digest is None else history.next_position + len(items)


def set_digest(db: Db, session_id: str, digest: str, end: int) -> None:
    """Keep `digest` as the session's stored client history's before `end`."""
    db.run(
        "UPDATE sessions SET client_digest = ?, client_digest_end = ? WHERE id = ?",
        digest,
        end,
        session_id,
    )


def _touch_session(db: Db, session_id: str, stamp: Any) -> str:
    """Mark the session active at `stamp`; its namespace, or `SessionNotFound`."""
    found = db.all(
        "UPDATE sessions SET updated_at = ? WHERE id = ? RETURNING namespace", stamp, session_id
    )
    if not found:
        raise SessionNotFound(f"no session with id {session_id}")
    return str(found[0]["namespace"])


def _namespace_of(db: Db, session_id: str) -> str:
    row = db.one("SELECT namespace FROM sessions WHERE id = ?", session_id)
    if row is None:
        raise SessionNotFound(f"no session with id {session_id}")
    return str(row["namespace"])


def change_status(db: Db, ids: Sequence[int], status: str) -> int:
    """Change status, keeping the session's message_count in step; its client history
    changes with it, so its digest is forgotten (the next sync reads it again)."""
    changed = 0
    for message_id in ids:
        row = db.one("SELECT session_id, status FROM messages WHERE id = ?", message_id)
        if row is None or row["status"] == status:
            continue
        delta = int(status != "superseded") - int(row["status"] != "superseded")
        db.run("UPDATE messages SET status = ? WHERE id = ?", status, message_id)
        db.run(
            "UPDATE sessions SET message_count = message_count + ?, client_digest = NULL, "
            "client_digest_end = NULL WHERE id = ?",
            delta,
            row["session_id"],
        )
        changed += 1
    return changed


def appended(
    session_id: str,
    start: int,
    ids: Sequence[int],
    items: Sequence[NewMessage],
    hashes: Sequence[str],
    created: datetime,
) -> list[StoredMessage]:
    """The records of messages just stored from `start` on, in order."""
    return [
        StoredMessage(
            id=message_id,
            session_id=session_id,
            position=start + index,
            message=item.message,
            content_hash=content_hash,
            token_count=item.token_count,
            created_at=created,
        )
        for index, (message_id, item, content_hash) in enumerate(
            zip(ids, items, hashes, strict=True)
        )
    ]


class SqlMessageLog(SqlStore[D]):
    @abstractmethod
    def _append(
        self,
        db: D,
        history: History,
        items: Sequence[NewMessage],
        hashes: Sequence[str],
        digest: str | None,
        usage: Usage | None = None,
    ) -> list[StoredMessage]:
        """Store `items` (at least one; their fingerprints: `hashes`) in the held session
        from `history.next_position` on and count them on the session, with `usage` added
        to its counters (`usage_counts`); keep `digest` (unless None) as its client
        history's up to the end of `items` (`History.digest`)."""

    def sync_messages(self, session_id: str, incoming: Sequence[NewMessage]) -> SyncResult:
        hashes = [message.fingerprint() for message in messages_of(incoming)]
        with self._writing() as db:
            # Writers take turns: the second sees what the first stored.
            history = hold_history(db, session_id, with_stored=True)
            plan, stale, kept = _plan_sync(db, history, hashes)
            superseded = change_status(db, stale, "superseded") if stale else 0
            new = list(incoming[plan.matched :])  # counted here, once (`CountWhenStored`)
            digest = history_digest([*kept, *client_hashes(new, hashes[plan.matched :])])
            if new:
                added = self._append(db, history, new, hashes[plan.matched :], digest)
            else:
                added = []
                if digest != history.digest:
                    set_digest(db, session_id, digest, history.next_position)
        end = added[-1].position + 1 if added else history.next_position
        return SyncResult(plan.matched, tuple(added), superseded, next_position=end)

    def edit_point(self, session_id: str, incoming: Sequence[Message]) -> int | None:
        with self._reading() as db:
            stored = db.column(CLIENT_HASHES, session_id)
        plan = plan_sync(stored, [m.fingerprint() for m in incoming])
        return plan.matched if plan.supersede_from is not None else None

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[NewMessage],
        *,
        unless_from: int | None = None,
        usage: Usage | None = None,
    ) -> list[StoredMessage]:
        hashes = [message.fingerprint() for message in messages_of(messages)]
        unless = (unless_from, hashes[0]) if unless_from is not None and messages else None
        with self._writing() as db:
            history = hold_history(db, session_id, unless=unless)
            if not messages or history.found:
                if usage:
                    count_usage(db, session_id, usage)
                return []
            return self._append(db, history, list(messages), hashes, None, usage)

    def list_messages(self, session_id: str, **query: Unpack[MessageQuery]) -> list[StoredMessage]:
        messages = [
            message_from_row(r) for r in self._message_rows(MESSAGE_COLUMNS, session_id, query)
        ]
        return [m for m in messages if m.transcript] if query.get("transcript_only") else messages

    def list_message_texts(self, session_id: str, **query: Unpack[TextQuery]) -> list[MessageText]:
        rows = self._message_rows(_TEXT_COLUMNS, session_id, query)
        return [
            MessageText(r["position"], r["role"], r["kind"], r["origin"], r["text"]) for r in rows
        ]

    def _message_rows(self, columns: str, session_id: str, query: TextQuery) -> list[Row]:
        """`columns` of a session's messages `query` asks for, in position order."""
        only = "" if query.get("include_superseded", False) else " AND status != 'superseded'"
        params: list[Any] = []
        if "before_position" in query:
            only += " AND position < ?"
            params.append(query["before_position"])
        if "roles" in query:
            roles = list(query["roles"])
            only += f" AND {among('role', roles)}"
            params += roles
        with self._reading() as db:
            return db.all(
                f"SELECT {columns} FROM messages WHERE session_id = ? "
                f"AND position >= ?{only} ORDER BY position",
                session_id,
                query.get("since_position", 0),
                *params,
            )

    def set_message_status(self, message_id: int, status: str) -> None:
        check_one_of(status, MESSAGE_STATUSES, "message status")
        with self._writing() as db:
            row = db.one("SELECT session_id FROM messages WHERE id = ?", message_id)
            if row is None:
                raise StoreError(f"no message with id {message_id}")
            hold_session(db, row["session_id"])
            change_status(db, [message_id], status)

    # --- events -------------------------------------------------------------------------
    def add_event(
        self,
        session_id: str,
        kind: str,
        payload: Mapping[str, Any],
        *,
        active: bool = True,
        **details: Unpack[EventDetails],
    ) -> Event:
        events = [NewEvent(kind, payload, **details)]
        return self.add_events(session_id, events, active=active)[0]

    def add_events(
        self, session_id: str, events: Sequence[NewEvent], *, active: bool = True
    ) -> list[Event]:
        stamp = now()
        out: list[Event] = []
        with self._writing() as db:
            # Events take no history's lock, only mark the session active; that one
            # statement also finds the session and its namespace (for their documents).
            # Not `active`: the session was found and marked in this transaction, so
            # its namespace is read only for a document, and an event without one
            # costs its insert alone (a turn's record: on PostgreSQL, a round trip).
            namespace = _touch_session(db, session_id, db.time(stamp)) if active else None
            for event in events:
                payload = dict(event.payload)
                created = event.at or stamp
                event_id = db.insert(
                    "INSERT INTO events (session_id, kind, payload, text, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    session_id,
                    event.kind,
                    db.json(payload),
                    event.text,
                    db.time(created),
                )
                text = event.text
                if text:
                    namespace = namespace or _namespace_of(db, session_id)
                    doc = Doc("event", str(event_id), namespace, session_id, None, text, created)
                    self._put_doc(db, doc, event.document)
                out.append(Event(event_id, session_id, event.kind, payload, event.text, created))
        return out

    def list_events(
        self, session_id: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[Event]:
        where = Where().equal("session_id", session_id).equal("kind", kind)
        with self._reading() as db:
            rows = select(db, EVENT_COLUMNS, "events", where, "id DESC", limit)
        return [event_from_row(r) for r in reversed(rows)]
