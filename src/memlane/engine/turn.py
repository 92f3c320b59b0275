"""One request's journey through the engine, whatever face it came from.

    prepare:  [@@ references]  ->  scaffold state block  ->  governance (mask,
              summarise, re-inject)  ->  long-term recall
              =>  Forward(messages), or DirectAnswer(text) when the turn must not
                  go upstream (an `@@` reference that names no session);
              what is new is queued to the store's writer meanwhile (stored first,
              where the turn depends on it: references, server history)
    finish:   queue the assistant turn and usage  ->  schedule background work
              (fact extraction, session summary and index, git commit)

Each stage is a function owned by its own module; this file only orders them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlane.engine.stages import StageClock
from memlane.store import SessionStore, SyncResult
from memlane.types import DocKind, Message, Session, Wire

if TYPE_CHECKING:
    from memlane.engine.governance.counting import Counting


@dataclass(frozen=True, slots=True)
class RecallNote:
    """One memory recall injected into this turn, with what each retrieval stage said."""

    ref: str
    scope: str
    keyword: float | None
    dense: float | None
    score: float
    kind: DocKind = "fact"
    """A memory entry, or a session's summary (`ref` is then the session's id)."""
    code: str | None = None
    """How its cited project files had moved on (`changed`, `moved`, `deleted`); None:
    current, or it cites none."""


@dataclass
class Turn:
    """What the engine knows about the request in flight."""

    key: str
    namespace: str
    model: str
    wire: Wire
    messages: list[Message]
    """The request's messages as the client sent them, in the internal shape."""
    session: Session | None = None
    """None for ephemeral sessions: governed and forwarded, never stored."""
    state: dict[str, str] | None = None
    """The session's stored state as this turn found it (the scaffold's blocks, the
    governance plan, the texts when the store holds them): read once, before the turn is
    shaped, and shared by every stage that reads it (`stored_state`); None: not read yet."""
    tenant: str = ""
    """Whose turn it is (`engine.tenancy`): the session is found or made in this tenant, and
    recall, `@@` and extraction stay inside it."""
    agentic: bool = False
    managed: bool = True
    """Whether the scaffold applies (the proxy: agentic clients, or all by setting)."""
    governed: bool = True
    """Whether context governance applies (the proxy: every client, unless set otherwise)."""
    ephemeral: bool = False
    continued: bool = False
    """The request carries only what is new after a conversation the upstream keeps
    (Responses `previous_response_id`): it is appended, not matched against the stored history,
    and governance applies only to what the request itself carries."""
    instructions: str = ""
    """Responses `instructions`: forwarded as sent, not a message, but it costs tokens."""
    flags: Mapping[str, str] = field(default_factory=dict)
    """`X-Memlane-*` header values by lower-case suffix (`todo`, `spec-mode`, …)."""
    server_history: bool = False
    """The request carries only its new messages; memlane supplies the session's working
    context in front of them (`X-Memlane-History: server`)."""
    chained: bool = False
    """A Responses `previous_response_id` memlane resolved from its own store: the whole
    stored conversation goes in front of the new items, whatever the upstream keeps."""
    synced: SyncResult | None = None
    """What storing the client's messages did, once they are stored."""
    storing: asyncio.Future[Any] | None = None
    """The last of the turn's writes queued to the store's writer (`engine.storing`); None
    while it queued none."""
    made_ahead: Session | None = None
    """The session as made ahead of its row (`engine.sessions.ahead`), for a new session's
    turn: the row is written first among the turn's writes."""
    lost: bool = False
    """The client's messages could not be stored: nor is the answer (the client's next
    request resends both). Set on the event loop, or by the turn's own write in the
    store's writer, which every later write of the turn follows."""
    waited: float = 0.0
    """Seconds the request has waited on memlane's own work so far (`engine.waits`): in
    all, never more than `request_wait_seconds`."""
    trimmed: bool = False
    """Set by governance when the request had to be cut to fit."""
    counting: Counting | None = None
    """Governance counting a new session's forwarded request while it is upstream (it fit
    by its size alone); `context` and `governed_tokens` are set once it is done
    (`governance.counted`)."""
    context: tuple[int, int, bool] | None = None
    """(tokens forwarded, the budget's limit, compacted now): what governance did, for the
    `X-Memlane-Context` response header."""
    clock: StageClock = field(default_factory=StageClock)
    """How long its stages took, for the `Server-Timing` response header."""
    notes: list[str] = field(default_factory=list)
    parent_key: str | None = None
    """A subagent's turn: its session is created as a child of this one's."""
    window_model: str = ""
    """The model name the window is looked up by, when not `model` (Anthropic's 1M-context
    beta: `<model>[1m]`)."""
    window: tuple[int, str] | None = None
    """(the window governance used, where it came from: `governance.budget.WindowSource`)."""
    upstream_error: str = ""
    """Why the upstream failed this turn (its address, status and a redacted line of its
    error), for the turn's record and `memlane doctor`."""
    client_compacts: bool = False
    """The client compacts its own history (Codex CLI, Claude Code): governance defers to it
    (`governance_defer_to_clients`)."""
    client: str = ""
    """The client's name and version (its User-Agent's first word), for people to read."""
    governed_tokens: tuple[int, int] | None = None
    """(tokens governance received, tokens it forwarded), when it ran."""
    recalled: tuple[RecallNote, ...] = ()
    """The long-term memories recall injected (`engine.turnlog` records them)."""

    def stored_state(self, store: SessionStore) -> dict[str, str]:
        """The session's state as the turn found it, read on first use. Nothing of the turn
        writes to it before the turn is forwarded: the scaffold's writes and governance's
        plan are queued behind the turn's messages (`engine.storing`)."""
        if self.state is None:
            self.state = store.get_state(self.session.id) if self.session is not None else {}
        return self.state

    @property
    def session_of(self) -> tuple[str, str]:
        """The session as the store's write queue knows it (`engine.writes`)."""
        return (self.tenant, self.key)

    @property
    def answer_resent(self) -> bool:
        """Whether the client's next request carries this turn's answer (it resends its
        whole history): then its store need not be done before the client has the whole
        answer, since a crash meanwhile loses only that turn, which the next request
        brings back (and a process that takes the next turn first stores it from there)."""
        return not (self.continued or self.server_history or self.chained)

    @property
    def user_text(self) -> str:
        """The latest user message's text: what retrieval and fact extraction look at."""
        for message in reversed(self.messages):
            if message.role == "user" and message.origin == "client" and message.kind == "message":
                return message.text
        return ""


@dataclass(frozen=True)
class Answer:
    """The final assistant output of a turn, assembled from the upstream's answer or stream."""

    messages: list[Message]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: bool = False
    response_id: str | None = None
    """The upstream's id for this answer (Responses), so a later `previous_response_id`
    can be resolved from memlane's own store."""
    cache_read_tokens: int = 0
    """Prompt tokens the upstream read from its prompt cache (Anthropic), part of
    `prompt_tokens`."""
    cache_creation_tokens: int = 0
    """Prompt tokens the upstream wrote to its prompt cache (Anthropic), part of
    `prompt_tokens`."""


@dataclass(frozen=True, slots=True)
class Forward:
    """What `pipeline.prepare` decided: send these messages upstream."""

    messages: list[Message]


@dataclass(frozen=True, slots=True)
class DirectAnswer:
    """What `pipeline.prepare` decided: answer the user with `text`, forward nothing.

    A face shows it as the assistant's reply in its own format and records it with
    `pipeline.finish(rt, turn, direct.answer())`, like any answer.
    """

    text: str

    def answer(self) -> Answer:
        return Answer([Message(role="assistant", text=self.text)])


Prepared = Forward | DirectAnswer
"""The result of `pipeline.prepare`: a face matches on it, nothing is raised."""
