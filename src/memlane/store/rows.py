"""Stored rows to records, the same for every backend.

SQLite hands back JSON as text and timestamps as ISO text; PostgreSQL hands
back decoded JSON and `datetime`s. `decoded` and `codec.moment` accept either,
so one mapper per record serves both backends.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from memlane.store.codec import cites_from_text, links_from_text, message_from_json, moment
from memlane.types import Event, Fact, Hit, Session, StoredMessage


class Row(Protocol):
    """A result row read by column name: `sqlite3.Row` or a psycopg `dict_row` dict."""

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Any: ...


# Column lists of the tables whose rows the store reads whole (and dumps).
SESSION_COLUMNS = (
    "id, key, namespace, title, parent_id, fork_position, summary, summarized_count, "
    "metadata, prompt_tokens, completion_tokens, cost_usd, message_count, created_at, updated_at, "
    "tenant"
)
MESSAGE_COLUMNS = (
    "id, session_id, position, role, kind, origin, wire, content, text, content_hash, "
    "token_count, status, created_at"
)
EVENT_COLUMNS = "id, session_id, kind, payload, text, created_at"


def decoded(value: Any) -> Any:
    """A JSON column's value: parsed from text (SQLite) or already decoded (PostgreSQL)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def session_from_row(row: Row, *, client_digest: str | None = None) -> Session:
    return Session(
        id=row["id"],
        key=row["key"],
        namespace=row["namespace"],
        created_at=moment(row["created_at"]),
        updated_at=moment(row["updated_at"]),
        title=row["title"],
        parent_id=row["parent_id"],
        fork_position=row["fork_position"],
        summary=row["summary"],
        summarized_count=row["summarized_count"],
        metadata=decoded(row["metadata"]) or {},
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_usd=float(row["cost_usd"]),
        message_count=int(row["message_count"]),
        tenant=row["tenant"] or "",
        client_digest=client_digest,
    )


def message_from_row(row: Row) -> StoredMessage:
    return StoredMessage(
        id=int(row["id"]),
        session_id=row["session_id"],
        position=int(row["position"]),
        message=message_from_json(decoded(row["content"])),
        content_hash=row["content_hash"],
        token_count=int(row["token_count"]),
        created_at=moment(row["created_at"]),
        status=row["status"],
    )


def event_from_row(row: Row) -> Event:
    return Event(
        id=int(row["id"]),
        session_id=row["session_id"],
        kind=row["kind"],
        payload=decoded(row["payload"]),
        text=row["text"],
        created_at=moment(row["created_at"]),
    )


def hit_from_row(row: Row, score: float) -> Hit:
    """Positional: a search builds dozens, and keywords cost a frozen dataclass twice the
    time (about 1 µs a hit)."""
    return Hit(
        row["kind"],
        row["ref"],
        row["scope"],
        row["session_id"],
        row["text"],
        score,
        moment(row["created_at"]),
        row["role"],
    )


def fact_from_row(row: Row) -> Fact:
    """A fact from a stored row (either backend) or a dumped one (one written before facts
    had validity columns or source links loads too)."""
    names = set(row.keys())

    def optional(name: str) -> Any:
        return row[name] if name in names else None

    def moment_or_none(name: str) -> datetime | None:
        value = optional(name)
        return None if value is None else moment(value)

    return Fact(
        id=row["id"],
        scope=row["scope"],
        conversation_id=row["conversation_id"],
        role=row["role"],
        text=row["text"],
        created_at=moment(row["created_at"]),
        updated_at=moment(row["updated_at"]),
        deleted=bool(row["deleted"]),
        replaced_by=row["replaced_by"],
        summary_kind=row["summary_kind"],
        source_session=row["source_session"],
        source_message=row["source_message"],
        content_hash=row["content_hash"] or "",
        valid_from=moment_or_none("valid_from"),
        valid_to=moment_or_none("valid_to"),
        supersedes=optional("supersedes"),
        source_turns=links_from_text(optional("source_turns")),
        cites=cites_from_text(optional("cites")),
    )
