"""Settings owned by the sessions part of memlane.

Summarisation knobs (running summary) are validated strictly: a bad
value is a start-up error naming the key. The index knobs are deliberately
loose here and checked by `memlane.engine.sessions.indexing.index_config`: an
invalid index configuration only disables indexing (with a warning at start-up)
so the proxy still serves.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memlane.config.fields import NonNegativeFloat, NonNegativeInt, SettingsPart


class SessionsSettings(SettingsPart):
    history: Literal["client", "server"] = "client"
    """client: forward each request's messages as sent. server: requests carry only their new
    messages and memlane prepends the session's working context (per request: X-Memlane-History). A
    request that resends its history is never fed twice."""

    sessions_without_project: Literal["shared", "isolated"] = "shared"
    """Sessions that name no project (no repo header, no working directory the client states):
    shared, one `default` namespace per tenant, so their facts, summaries and `@@`
    references reach each other; isolated, each session a namespace of its own
    (`session:<key>`)."""

    summary_enabled: bool = False
    """Keep a running summary of each session: past the threshold, the oldest messages are folded
    into it in the background. The working context (summary plus the rest) is what server-side
    history forwards, what `memlane chat` sends, and what `memlane.working_context()` returns; a
    client that sends its own history is forwarded as sent."""

    summary_threshold: Annotated[int, Field(ge=1)] = 40
    """Stored messages a session must exceed before summarising."""

    summary_keep_last: NonNegativeInt = 12
    """Newest messages that always stay verbatim."""

    index_enabled: bool = True
    """Generate session metadata (name, description, summary, tags) in the background."""

    index_min_new_user_messages: int = 5
    """New user messages since the last indexing that trigger a new one (checked at start-up;
    invalid values disable indexing with a warning)."""

    index_max_input_chars: int = 50_000
    """Characters of conversation sent to the index model; the most recent part is kept."""

    index_model: str | None = None
    """Model that writes session metadata; empty means summary_model, then llm_model, then the model
    of the request."""

    upstream_price_input: NonNegativeFloat = 0.0
    """USD per million input tokens of the upstream model: each turn's and session's cost (0: not
    priced)."""

    upstream_price_output: NonNegativeFloat = 0.0
    """USD per million output tokens of the upstream model."""

    index_price_input: float = 0.0
    """USD per million input tokens of the index and query model (cost telemetry)."""

    index_price_output: float = 0.0
    """USD per million output tokens of the index and query model."""

    query_max_input_chars: Annotated[int, Field(ge=1_000)] = 60_000
    """Characters of a past session sent to answer a question about it (stored summaries plus the
    most recent part)."""

    references_across_namespaces: bool = False
    """Let `@@name` (and `@@name: question`) reach a session of another namespace of the same
    tenant. false: a reference resolves only among the asking session's namespace."""
