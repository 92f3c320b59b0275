"""The keyword arguments of the store's methods, named once for the protocol (`store.base`)
and the SQL both backends share.

Each is a `TypedDict` the method takes as `**kwargs: Unpack[…]`: callers pass
keywords as before, type checkers hold them to these fields, and a field left
out takes the default its docstring names (the implementation applies it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Required, TypedDict

from memlane.types import FactRole, Role


class SessionQuery(TypedDict, total=False):
    """Which sessions `list_sessions` lists."""

    namespace: str | None
    """Only this namespace's (default: every namespace's)."""
    limit: int | None
    """The newest this many (default: all)."""
    tenant: str | None
    """Only this tenant's (default "": without tenancy; None: every tenant's, for the
    operator)."""


class SessionChanges(TypedDict, total=False):
    """What `update_session` changes: a field left out, or None, keeps its value."""

    title: str | None
    summary: str | None
    """The running summary (`engine.sessions.working`)."""
    summarized_count: int | None
    """How many of the session's first messages the running summary covers."""
    metadata: Mapping[str, Any] | None
    """The index metadata (name, tags, summary), replaced as a whole."""
    active: bool
    """Whether the change marks the session as used now (`updated_at`, by which lists sort;
    default True). A rename by hand is not use of the session."""


class Tombstone(TypedDict, total=False):
    """How `delete_fact` ends an entry: a field left out, or None, takes its default."""

    replaced_by: str | None
    """The entry that replaces it (one named before stays)."""
    at: datetime | None
    """When it stopped being true (default now)."""
    updated_at: datetime | None
    """When it was deleted (default now; a tombstone file's own time, so the file and the
    index say the same)."""


class Usage(TypedDict, total=False):
    """What `add_usage` adds to a session's counters (each default 0)."""

    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class TextQuery(TypedDict, total=False):
    """Which of a session's messages `list_message_texts` lists."""

    include_superseded: bool
    """Messages an edited or regenerated history replaced too (default False)."""
    since_position: int
    """From this position on (default 0)."""
    before_position: int
    """Before this position only (default: to the last)."""
    roles: Sequence[Role]
    """Only messages of these roles (default: every role): a reader that counts the
    user's prompts reads none of the tool results between them."""


class MessageQuery(TextQuery, total=False):
    """Which of a session's messages `list_messages` lists."""

    transcript_only: bool
    """Only what the conversation shows (`StoredMessage.transcript`; default False)."""


class EventDetails(TypedDict, total=False):
    """What `add_event` takes besides the event's kind and payload (`NewEvent`'s other
    fields, with their defaults)."""

    text: str
    document: str | None
    at: datetime | None


class FactQuery(TypedDict, total=False):
    """Which entries `list_facts` lists (each left out: no restriction)."""

    scope: str | None
    conversation_id: str | None
    roles: Sequence[FactRole] | None
    ids: Sequence[str] | None
    """Only these entries (one read for many, where `get_fact` is one each)."""
    include_deleted: bool
    """Tombstones too (default False)."""
    limit: int | None
    """The first this many (default: all)."""


class RareBounds(TypedDict, total=False):
    """How rare a word `rare_term_hits` follows must be, and how much it may read."""

    max_df: Required[int]
    """At most this many documents passing the filter hold it."""
    max_share: float
    """And at most this share of those documents (default 1.0: no bound)."""
    limit: int | None
    """The rarest words only, while their holders together stay within this many
    (`rare_terms.rarest`; default: every word)."""


PAGE_SIZE = 50
"""Entries or sessions on one page of the inspector's lists, unless the caller says."""


class Paging(TypedDict, total=False):
    """Which page a paged read returns."""

    offset: int
    """Rows skipped before the page (default 0)."""
    limit: int
    """The page's size (default `PAGE_SIZE`)."""


class SessionPage(Paging, total=False):
    """Which page of sessions `page_sessions` reads."""

    query: str
    """A substring (any case) of the title, key, namespace, id or index metadata (default
    "": any session)."""
    namespace: str | None
    """Only this namespace's (default: every namespace's)."""


class FactPage(Paging, total=False):
    """Which page of entries `page_facts` reads."""

    scope: str | None
    """Only this scope's (default: every scope's)."""
    include_deleted: bool
    """Tombstones too (default False)."""
