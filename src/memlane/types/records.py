"""Plain records the store hands back: sessions, stored messages, events, facts, hits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from memlane.types.messages import Kind, Message, Origin, Role

DocKind = Literal["fact", "event", "session"]
"""What the search index holds: memory entries, events (dropped history) and session
summaries. A message is not a document (`store.message_log` says why)."""
FactRole = Literal["memory", "user", "assistant", "summary"]
MessageStatus = Literal["ok", "failed", "superseded"]


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation memlane keeps, with its running summary and counters."""

    id: str
    key: str
    namespace: str
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    parent_id: str | None = None
    fork_position: int | None = None
    summary: str = ""
    summarized_count: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    message_count: int = 0
    tenant: str = ""
    """Whose session it is: a salted hash of the client's credential under credential
    tenancy, "" otherwise. A key is unique within its tenant."""
    client_digest: str | None = field(default=None, compare=False, repr=False)
    """`count:digest` of the client messages it has stored (`store.transcript.
    history_digest`), where the read asked for it (`Store.find_session_state`, what a
    turn's shape reads); None otherwise. Not part of what a session is: two reads of one
    session compare equal whether or not they carry it."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as persisted: ordered by `position` inside its session."""

    id: int
    session_id: str
    position: int
    message: Message
    content_hash: str
    token_count: int
    created_at: datetime
    status: MessageStatus = "ok"

    @property
    def transcript(self) -> bool:
        return self.message.is_transcript


@dataclass(frozen=True, slots=True)
class MessageText:
    """A stored message's words and what they are, without its stored content: what a
    reader of the conversation's words (session indexing) needs (`Store.list_message_texts`).
    """

    position: int
    role: Role
    kind: Kind
    origin: Origin
    text: str


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to a session: history dropped, output offloaded, a loop seen."""

    id: int
    session_id: str
    kind: str
    payload: Mapping[str, Any]
    text: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CitedFile:
    """A project file a memory names, as it was when the memory was noted."""

    path: str
    """Relative to the project folder, `/`-separated (`conf/app.toml`)."""
    blob: str
    """What the file held: `git:<blob id>` (as `git hash-object` computes it) when git
    tracked it, else `sha256:<hex>` of its bytes."""


@dataclass(frozen=True, slots=True)
class Citations:
    """The project files a memory cites, and the project's state when they were noted
    (or last confirmed): what recall compares with to say the code moved on."""

    root: str
    """The project folder (absolute) the paths are relative to."""
    files: tuple[CitedFile, ...]
    noted_at: datetime
    """When the files were read: the memory was noted, or a person confirmed it since."""
    head: str | None = None
    """The project's HEAD commit then (None: not a git repository, or no commit yet)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """A long-term memory entry: an extracted fact, a remembered turn or a rolling summary.

    Deleted entries stay as tombstones (`deleted`, `replaced_by`) so history is auditable.
    A fact also knows when it was true: from `valid_from` (the time of the message it came
    from) until `valid_to`. A fact replaced by a later one is closed, not deleted: it keeps
    its text, gets a `valid_to`, and `replaced_by` / `supersedes` link the two versions.
    """

    id: str
    scope: str
    conversation_id: str
    role: FactRole
    text: str
    created_at: datetime
    updated_at: datetime
    deleted: bool = False
    replaced_by: str | None = None
    summary_kind: str | None = None
    source_session: str | None = None
    source_message: int | None = None
    content_hash: str = ""
    valid_from: datetime | None = None
    """When it became true; None: since `created_at`."""
    valid_to: datetime | None = None
    """When it stopped being true (a later version, a delete, a person's edit); None: still."""
    supersedes: str | None = None
    """The earlier version this one replaced (that version's `replaced_by` names this one)."""
    source_turns: tuple[str, ...] = ()
    """The remembered turns (entry ids) an extracted fact came from: recall brings them
    with it. A deleted fact links nothing."""
    cites: Citations | None = None
    """The project files it names, as they were when it was noted (None: it names none, or
    its project folder is not on this machine)."""

    @property
    def since(self) -> datetime:
        """The start of its validity."""
        return self.valid_from or self.created_at

    def valid_at(self, moment: datetime) -> bool:
        """True at `moment`: not deleted, started at or before it, not closed by then."""
        if self.deleted or self.since > moment:
            return False
        return self.valid_to is None or moment < self.valid_to


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result, from keyword or vector search, before fusion."""

    kind: DocKind
    ref: str
    scope: str
    session_id: str | None
    text: str
    score: float
    created_at: datetime
    role: str | None = None
    """A fact's role (`memory`, `user`, `assistant`, `summary`); None for other kinds."""
