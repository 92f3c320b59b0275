"""The storage contract every backend implements (SQLite embedded, PostgreSQL at scale).

Everything memlane persists goes through `Store`, composed of one protocol per
role, so code that needs one role asks for that role alone:

- `SessionStore`: sessions, forks, usage counters and scaffold state;
- `MessageLog`: each session's ordered messages and its events;
- `FactStore`: long-term memory entries (facts);
- `SearchIndex`: the derived keyword and vector index over all of them;
- `MetaStore`: small key/value facts about the store;
- `InspectorReads`: bounded reads for the web inspector's pages, and counters per day;
- `StoreCopy`: whole tables out and in (`store migrate`).

Methods are synchronous and short; async callers run them in a worker thread.
Backend-specific SQL never leaves the backend's package (`store.sqlite`,
`store.postgres`); logic the backends share lives beside this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, Unpack, runtime_checkable

import numpy as np
import numpy.typing as npt

from memlane.store.arguments import (
    EventDetails,
    FactPage,
    FactQuery,
    MessageQuery,
    RareBounds,
    SessionChanges,
    SessionPage,
    SessionQuery,
    TextQuery,
    Tombstone,
    Usage,
)
from memlane.types import (
    DocKind,
    Event,
    Fact,
    FactRole,
    Hit,
    Message,
    MessageText,
    Session,
    StoredMessage,
)

Vector = npt.NDArray[np.float32]

# Tables that `dump` / `load` move between backends, in dependency order.
TABLES = (
    "sessions",
    "session_state",
    "messages",
    "events",
    "facts",
    "vectors",
    "meta",
    "daily_counts",
)


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and what to do."""


class SessionNotFound(StoreError):
    pass


def check_one_of(value: str, allowed: Sequence[str], what: str) -> None:
    """Refuse a `what` (a table name, which goes into SQL text; a message status) that is
    not one of `allowed`, naming those it may be."""
    if value not in allowed:
        raise StoreError(f"unknown {what} {value!r}: one of {', '.join(allowed)}")


def check_table(table: str) -> None:
    check_one_of(table, TABLES, "table")


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append, with its token count (computed by the caller's tokenizer)."""

    message: Message
    token_count: int = 0


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append; non-empty `text` is keyword-indexed for retrieval."""

    kind: str
    payload: Mapping[str, Any]
    text: str = ""
    document: str | None = None
    """What the keyword index reads when it is more than the text (the text with its
    neighbours'); a hit still shows the text."""
    at: datetime | None = None
    """When what it records happened (a dropped message: when it was said); default now."""


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What `sync_messages` did with a client's resent history."""

    matched: int
    added: tuple[StoredMessage, ...]
    superseded: int
    next_position: int | None = None
    """The session's next free position once the client's messages were stored (None: not
    known): where the answer to them goes, unless the client's next request stored it."""


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which documents a search may return. `None` means no restriction on that axis."""

    kinds: tuple[DocKind, ...] = ("fact", "event")
    scopes: tuple[str, ...] | None = None
    session_id: str | None = None
    fact_roles: tuple[FactRole, ...] | None = None
    turns_left_out: str | None = None
    """A scope whose remembered turns (facts of role user or assistant) do not pass, its
    other documents do: a request that still carries its conversation recalls from the
    conversation's scope without searching the turns it sends (`engine.memory.recall`)."""
    valid_at: datetime | None = None
    """Only facts true at this moment (`Fact.valid_at`); events are not held
    to it. None: closed facts are found too."""


@runtime_checkable
class SessionStore(Protocol):
    """Sessions: created by key, forked, counted, deleted with everything of theirs."""

    def ensure_session(
        self,
        key: str,
        *,
        namespace: str | None = None,
        tenant: str = "",
        session_id: str | None = None,
    ) -> Session:
        """The session for `key` in `tenant`, created on first use; `namespace` defaults to
        the key. A new row gets `session_id` when given (a session made ahead of its row,
        `engine.sessions.ahead`); a row that exists is returned whatever its id."""
        ...

    def get_session(self, session_id: str) -> Session | None:
        """By id, whatever its tenant: an id comes from a lookup that was scoped already."""
        ...

    def find_session(self, key: str, *, tenant: str = "") -> Session | None:
        """The session with this key in `tenant` ("": no tenancy); keys are unique per tenant."""
        ...

    def find_session_state(
        self, key: str, *, tenant: str = ""
    ) -> tuple[Session, dict[str, str]] | None:
        """`find_session` and that session's `get_state`, in one read: what a turn's shape
        reads first (one connection, and on PostgreSQL one pool checkout, not two). The
        session carries its `client_digest`: whether the request still carries the
        conversation as stored (`engine.memory.recall`)."""
        ...

    def list_sessions(self, **query: Unpack[SessionQuery]) -> list[Session]:
        """Newest activity first."""
        ...

    def update_session(self, session_id: str, **changes: Unpack[SessionChanges]) -> Session:
        """Set the given fields (one left out, or None, stays as it is)."""
        ...

    def retitle(self, session_id: str, title: str) -> None:
        """Set the session's title without marking it active (`updated_at` stays): a
        correction of what is stored, not something the session did."""
        ...

    def add_usage(self, session_id: str, **usage: Unpack[Usage]) -> None:
        """Add to the session's token and cost counters; `SessionNotFound` when there is
        no such session. It does not mark the session active (`updated_at`): the write
        the usage comes with does."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """Remove the session and everything of it: messages, events, state, its facts, index.
        Its forks and child sessions stay, their link to it (`parent_id`, `fork_position`)
        cleared."""
        ...

    def fork_session(
        self, session_id: str, *, new_key: str, at_position: int | None = None
    ) -> Session:
        """A new session of the source's tenant whose history is a copy of the source's
        messages before `at_position`."""
        ...

    # --- scaffold state (todo, pinned, anchor, spec flags) ----------------
    def get_state(self, session_id: str) -> dict[str, str]: ...

    def set_state(self, session_id: str, name: str, value: str | None) -> None:
        """Store one named state text; None removes it."""
        ...


@runtime_checkable
class MessageLog(Protocol):
    """A session's history: its messages in position order, and its events."""

    def sync_messages(self, session_id: str, incoming: Sequence[NewMessage]) -> SyncResult:
        """Store what is new in a client's full history, atomically per session.

        Clients resend the whole conversation each turn. The client-origin
        messages already stored are matched against `incoming` by position and
        fingerprint; the unmatched rest is appended. A history that diverges
        (an edited or regenerated turn) marks the stored tail `superseded`.
        A message said twice is two messages: matching is positional.
        """
        ...

    def edit_point(self, session_id: str, incoming: Sequence[Message]) -> int | None:
        """Read only: where a resent history departs from the stored one, when
        `sync_messages` would supersede stored messages (how many of `incoming` match,
        in order); None when it would only append, or add nothing.

        What a turn's shape depends on, read before its messages are stored (they are
        stored while the request is on its way upstream)."""
        ...

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[NewMessage],
        *,
        unless_from: int | None = None,
        usage: Usage | None = None,
    ) -> list[StoredMessage]:
        """Append after the last stored message (assistant turns, memlane's own items).

        `unless_from`: an answer stored after its client has it may have been stored
        already, from position `unless_from` on, by the client's next request (served by
        another process, it resent the answer): then nothing is appended and [] returned.
        `usage`: what the answer cost, added to the session's counters as `add_usage`
        does, in the statement that counts the messages (appended or not): an answer's
        store is one update of its session's row, not two.
        """
        ...

    def list_messages(self, session_id: str, **query: Unpack[MessageQuery]) -> list[StoredMessage]:
        """Messages in position order."""
        ...

    def list_message_texts(self, session_id: str, **query: Unpack[TextQuery]) -> list[MessageText]:
        """The messages' positions, roles, kinds, origins and texts, in position order: a
        reader of the conversation's words does not pay for decoding each message's stored
        content (an agent's tool results are most of a session's bytes)."""
        ...

    def set_message_status(self, message_id: int, status: str) -> None: ...

    def add_event(
        self,
        session_id: str,
        kind: str,
        payload: Mapping[str, Any],
        *,
        active: bool = True,
        **details: Unpack[EventDetails],
    ) -> Event:
        """Append an event; non-empty `text` is keyword-indexed for retrieval, as
        `document` when given (the text with its context: `store.documents`); a hit
        shows the text. `at` dates it when what it records happened earlier (default
        now): a search shows that time. The session is marked active (`updated_at`)
        unless not `active`: for a caller whose write in the same transaction marked it
        already (a turn's record after its answer's messages), which so found it too."""
        ...

    def add_events(
        self, session_id: str, events: Sequence[NewEvent], *, active: bool = True
    ) -> list[Event]:
        """Append several events in one transaction, in order (a compaction's dropped
        items); `active` as `add_event`'s."""
        ...

    def list_events(
        self, session_id: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[Event]:
        """Oldest first; with `limit`, the newest `limit` events (still oldest first)."""
        ...


@runtime_checkable
class FactStore(Protocol):
    """Long-term memory entries: the store's copy of the memory files, indexed for search."""

    def put_fact(self, fact: Fact) -> None:
        """Insert or replace the entry with this id, and re-index its text."""
        ...

    def put_facts(self, facts: Sequence[Fact]) -> None:
        """`put_fact` for several, in one transaction: each is indexed once, with the
        neighbours it has once they are all written."""
        ...

    def get_fact(self, fact_id: str) -> Fact | None: ...

    def list_facts(self, **query: Unpack[FactQuery]) -> list[Fact]:
        """Oldest first."""
        ...

    def delete_fact(self, fact_id: str, **tombstone: Unpack[Tombstone]) -> bool:
        """Tombstone: the entry stays readable (deleted=True) and leaves the search index;
        its validity ends (`Tombstone.at`) unless it had ended already."""
        ...

    def purge_fact(self, fact_id: str) -> bool:
        """Remove the entry entirely (its file is gone)."""
        ...


@runtime_checkable
class SearchIndex(Protocol):
    """The derived index over facts, events and session summaries: keywords and vectors."""

    def keyword_search(self, query: str, flt: SearchFilter, *, limit: int = 10) -> list[Hit]:
        """BM25-style ranking over `store.analysis.terms`; best first, higher score is better."""
        ...

    def rare_term_hits(
        self, words: Sequence[str], flt: SearchFilter, **bounds: Unpack[RareBounds]
    ) -> dict[str, list[Hit]]:
        """For each of `words` (analyser terms, `store.analysis`) rare enough (`RareBounds`)
        among the documents passing `flt` (in what the index reads), the documents among
        them whose own text says it (what a hit shows: a turn, not its neighbours), oldest
        first; a word more common than that, or said by none, is left out. What
        entity-aware expansion reads (`engine.retrieval.expand`). A hit's `score` is 0."""
        ...

    def put_vectors(
        self, kind: DocKind, items: Sequence[tuple[str, Vector]], *, model: str
    ) -> None:
        """Attach embeddings (unit length) made by `model` to indexed documents."""
        ...

    def vector_search(
        self, vector: Vector, flt: SearchFilter, *, model: str, limit: int = 10
    ) -> list[Hit]:
        """Cosine similarity over vectors of `model`; best first."""
        ...

    def get_vectors(
        self, kind: DocKind, refs: Sequence[str], *, model: str
    ) -> dict[str, Vector]: ...

    def missing_vectors(
        self, kind: DocKind, *, model: str, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """(ref, text) of active documents that have no vector for `model` yet."""
        ...

    def drop_vectors(self, *, except_model: str) -> int:
        """Remove vectors of every other model (the embedding model changed)."""
        ...

    def reindex_turns(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index every remembered turn again with its date and neighbours
        (`store.documents`); returns how many documents changed."""
        ...


@runtime_checkable
class MetaStore(Protocol):
    """Small key/value facts about the store (the embedding model, learned windows)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def claim_meta(self, key: str, value: str) -> str:
        """Set `key` to `value` unless it has a value already; return the value it has now
        (replicas that start together agree on the first one written)."""
        ...


@runtime_checkable
class InspectorReads(Protocol):
    """What the web inspector's pages read: paged lists, a feed, counters per day."""

    def page_sessions(self, **which: Unpack[SessionPage]) -> tuple[list[Session], int]:
        """One page of sessions, newest activity first, and how many match in all."""
        ...

    def session_namespaces(self) -> list[tuple[str, int]]:
        """(namespace, session count), by name."""
        ...

    def page_facts(self, **which: Unpack[FactPage]) -> tuple[list[Fact], int]:
        """One page of entries, newest first, and how many match in all."""
        ...

    def fact_scopes(self) -> list[tuple[str, int]]:
        """(scope, live entry count), by scope."""
        ...

    def recent_events(
        self, *, kinds: Sequence[str], after_id: int = 0, limit: int = 50
    ) -> list[Event]:
        """Events of these kinds across every session, newest first, with ids above `after_id`."""
        ...

    def add_daily_counts(self, day: str, counts: Mapping[str, int]) -> None:
        """Add to the named counters of `day` (`YYYY-MM-DD`, UTC); safe across processes."""
        ...

    def daily_counts(self, *, since: str) -> dict[str, dict[str, int]]:
        """{day: {counter: value}} for every day from `since` on."""
        ...


@runtime_checkable
class StoreCopy(Protocol):
    """Whole tables out and in, so one backend's store can be copied into another."""

    url: str
    """Where the store is, without a password: named in what a copy reports."""

    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of a table in `TABLES`, as plain JSON-ready values."""
        ...

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert rows produced by another backend's `dump`, keeping ids."""
        ...

    def count(self, table: str) -> int: ...


@runtime_checkable
class Store(
    SessionStore,
    MessageLog,
    FactStore,
    SearchIndex,
    MetaStore,
    InspectorReads,
    StoreCopy,
    Protocol,
):
    """The persistence seam: every role at once. `tests/store/contract/` holds the behaviour
    each method owes, one test module per role, run against every backend."""

    def purge_deleted(self) -> None:
        """Leave no copy of deleted rows in the store's files (`--purge`): SQLite overwrites
        freed pages as it deletes (`secure_delete`) and here checkpoints and truncates its
        WAL, which still holds older versions of those pages; PostgreSQL rewrites the
        tables that held them (`VACUUM FULL`, then `ANALYZE`: statistics sample values)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """The writes this thread makes inside commit together, as one transaction; one
        that fails undoes only itself (a savepoint). What one turn stores is one commit.
        A store call that fails inside it, its error caught, fails it too (PostgreSQL
        refuses the rest of a transaction after an error): a caller that goes on after a
        failure wraps that call in a `transaction` of its own."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """`transaction`, for a batch of many sessions' writes (`store.group_commit`): on
        PostgreSQL one replica's batch at a time, so that two batches never wait on each
        other's rows."""
        ...

    def close(self) -> None: ...
