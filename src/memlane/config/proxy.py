"""Settings owned by the proxy part of memlane: who gets the scaffold, its parts, limits, admin."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from memlane.config.fields import NonNegativeInt, PositiveInt, SettingsPart


class ProxySettings(SettingsPart):
    scaffold_clients: Literal["agentic", "all"] = "agentic"
    """Which clients get the session scaffold (todo / pinned / anchor, Spec Mode): agentic (Codex,
    Claude Code, factory-cli/droid, warp, Stainless SDKs) or all."""

    governance_clients: Literal["all", "agentic"] = "all"
    """Which clients get context governance (masking, compaction, pre-flight): all keeps every
    client's requests inside the window. Every turn is stored either way."""

    todo_enabled: bool = True
    """Inject the session's todo.md into the state block."""

    todo_max_chars: NonNegativeInt = 4000
    """Longest TODO kept (X-Memlane-Todo or todo.md)."""

    pinned_enabled: bool = True
    """Inject pinned.md (and the harness AGENTS.md) into the state block."""

    pinned_max_chars: NonNegativeInt = 8000
    """Longest pinned text injected (pinned.md + AGENTS.md)."""

    anchor_enabled: bool = True
    """Inject the session's summary.md as the anchor."""

    anchor_max_chars: NonNegativeInt = 4000
    """Longest anchor injected."""

    spec_mode: bool = False
    """Ask agents for a reviewable spec before any code change, until approved (per request:
    X-Memlane-Spec-Mode: true)."""

    harness_root: Path | None = None
    """Folder whose AGENTS.md is merged into every session's pinned text."""

    scaffold_store: Literal["auto", "files", "store"] = "auto"
    """Where todo/pinned/summary live: files in the session folder, or the store (shared by proxy
    replicas); auto picks the store for PostgreSQL, files otherwise."""

    max_body_bytes: PositiveInt = 32 * 1024 * 1024
    """Largest request body accepted (413 above)."""

    admin_token: SecretStr | None = None
    """Bearer token the /v1/memlane/ admin API requires (at least 16 characters); unset, memlane
    generates one into $MEMLANE_HOME/admin_token. Needed to bind a non-loopback address."""

    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names memlane answers to besides its loopback names and its bind address
    (comma-separated in the environment; `*` allows any). Other Host headers are refused: a
    DNS-rebinding page cannot reach memlane."""

    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins (`https://app.example`) allowed to call memlane; a request from any other web
    page (an Origin header) is refused."""

    tenancy: Literal["auto", "none", "credential"] = "auto"
    """Whose data a request may reach. none: one person, every request sees every session of the
    home; credential: every session and memory belongs to a salted hash of the client's key
    (Authorization, x-api-key), and nothing crosses between keys; a request without a key is
    refused. auto: credential when binding a non-loopback address, else none."""

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value
