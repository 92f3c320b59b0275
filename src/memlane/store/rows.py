"""Stored rows to records, the same for every backend.

SQLite hands back JSON as text and timestamps as ISO text; PostgreSQL hands
back decoded JSON and `datetime`s. `decoded` and `codec.moment` accept either,
so one mapper per record serves both backends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from memlane.store.analysis import might_say, term_set
from memlane.store.codec import links_from_text, message_from_json, moment
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


def session_from_row(row: Row) -> Session:
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
    return Hit(
        kind=row["kind"],
        ref=row["ref"],
        scope=row["scope"],
        session_id=row["session_id"],
        text=row["text"],
        score=score,
        created_at=moment(row["created_at"]),
    )


def rare_bound(max_df: int, max_share: float, visible: int) -> int:
    """How many holders a rare word may have among `visible` documents: at most `max_df`,
    and at most `max_share` of them (in a handful of documents no word is rare)."""
    return min(max_df, int(max_share * visible))


def rarest(held: Mapping[str, Sequence[Any]], limit: int | None) -> dict[str, Sequence[Any]]:
    """The words with the fewest holders first, as long as their holders together stay
    within `limit` (None: all): the rarer a shared word, the stronger the link, and a
    request reads a bounded number of documents however many words its seeds have."""
    if limit is None:
        return dict(held)
    out: dict[str, Sequence[Any]] = {}
    used = 0
    for word in sorted(held, key=lambda w: (len(held[w]), w)):
        used += len(held[word])
        if used > limit:
            break
        out[word] = held[word]
    return out


def own_holders(held: Mapping[str, Sequence[Any]], rows: Mapping[Any, Row]) -> dict[str, list[Hit]]:
    """`SearchIndex.rare_term_hits` from each word's holders (row keys, oldest first) and
    their rows (those that passed the filter): only a document whose own text says the
    word holds it (a turn's indexed document also has its neighbours' words)."""
    lowered: dict[Any, str] = {}
    said: dict[Any, frozenset[str]] = {}
    hits: dict[Any, Hit] = {}
    out: dict[str, list[Hit]] = {}
    for word, keys in held.items():
        for key in keys:
            row = rows.get(key)
            if row is None:
                continue
            low = lowered.get(key)
            if low is None:
                low = lowered[key] = row["text"].lower()
            if not might_say(low, word):
                continue  # most holders only hold it through a neighbour: no analysis
            words = said.get(key)
            if words is None:
                words = said[key] = term_set(row["text"])
            if word in words:
                hit = hits.get(key)
                if hit is None:
                    hit = hits[key] = hit_from_row(row, 0.0)
                out.setdefault(word, []).append(hit)
    return out


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
    )
