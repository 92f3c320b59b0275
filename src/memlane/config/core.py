"""Settings every face needs: where data lives, where the proxy listens, what it talks to."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


def http_url(value: str | None) -> str | None:
    """An endpoint must be `http(s)://host…`: caught at start, not on every request."""
    if not value:
        return value
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL: write it as http://HOST:PORT/v1")
    return value.strip()


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """`localhost`, or an address on the loopback interface (127.0.0.0/8, ::1)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CoreSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path = Field(
        default=Path("~/.local/share/memlane"),
        description="Data home: database, session folders, memory files.",
    )
    host: str = Field(default="127.0.0.1", description="Address the proxy binds.")
    port: int = Field(default=8100, ge=0, le=65535, description="Port the proxy binds (0: any).")
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Processes serving the proxy's port on one store (about one per core for "
        "heavy traffic); one of them does the once-per-home work, a worker that dies is "
        "restarted.",
    )
    upstream_url: str = Field(
        default="http://127.0.0.1:11434/v1",
        description="OpenAI-compatible base URL requests are forwarded to.",
    )
    upstream_api_key: SecretStr | None = Field(
        default=None,
        description="Key sent upstream when the client sends none. Never stored or logged.",
    )
    anthropic_upstream_url: str = Field(
        default="https://api.anthropic.com",
        description="Anthropic-compatible base URL (no /v1) that /v1/messages requests "
        "(Claude Code, the anthropic SDK) are forwarded to.",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        description="Key sent as x-api-key to the Anthropic upstream when the client sends "
        "none. Never stored or logged.",
    )
    upstream_timeout: float = Field(
        default=600.0, gt=0, description="Seconds to wait for the upstream before failing."
    )
    store_url: str | None = Field(
        default=None,
        description="postgresql://… selects PostgreSQL; empty means the SQLite file in home.",
    )
    sqlite_synchronous: Literal["normal", "full"] = Field(
        default="normal",
        description="normal survives a process crash; full also survives power loss (slower).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log verbosity."
    )
    embedding_backend: Literal["minilm", "openai", "hashing"] = Field(
        default="minilm",
        description="minilm: the packaged all-MiniLM-L6-v2 (offline); openai: an "
        "OpenAI-compatible /v1/embeddings endpoint; hashing: a tiny deterministic embedder.",
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Model name sent to the embeddings endpoint (openai backend).",
    )
    embedding_base_url: str | None = Field(
        default=None, description="Embeddings endpoint; empty means upstream_url."
    )
    embedding_api_key: SecretStr | None = Field(
        default=None,
        description="Key for the embeddings endpoint; empty means upstream_api_key, then the "
        "OPENAI_API_KEY environment variable.",
    )
    llm_provider: Literal["openai", "anthropic"] = Field(
        default="openai",
        description="The API memlane's own LLM calls (facts, summaries, session ask) speak: "
        "openai (chat completions at llm_base_url, else upstream_url) or anthropic (Messages at "
        "llm_base_url, else anthropic_upstream_url; the key llm_api_key, else anthropic_api_key, "
        "else ANTHROPIC_API_KEY, else the key a Claude Code request carries).",
    )
    llm_model: str | None = Field(
        default=None,
        description="Model memlane's own LLM calls use when no request names one (CLI, library).",
    )
    llm_base_url: str | None = Field(
        default=None,
        description="Base URL of memlane's own LLM calls (summaries, facts, metadata); "
        "empty means upstream_url.",
    )
    llm_api_key: SecretStr | None = Field(
        default=None,
        description="Key for memlane's own LLM calls; empty means upstream_api_key, then the "
        "OPENAI_API_KEY environment variable. Never stored or logged.",
    )
    llm_timeout: float = Field(
        default=120.0, gt=0, description="Seconds memlane's own LLM calls may take before failing."
    )
    summary_model: str | None = Field(
        default=None,
        description="A dedicated (cheaper) model for summaries; empty means llm_model or the "
        "model of the request being summarised.",
    )
    summary_base_url: str | None = Field(
        default=None,
        description="Base URL of the summary model; empty means llm_base_url, then upstream_url.",
    )
    tokenizer: Literal["auto", "cl100k_base", "o200k_base"] = Field(
        default="auto",
        description="auto: the encoding of the model named in the request (o200k_base for the "
        "gpt-4o/4.1/5 and o-series families, cl100k_base for gpt-4/3.5, and cl100k_base for "
        "models it does not know, e.g. local ones); or force one encoding for every model.",
    )

    @field_validator(
        "upstream_url",
        "anthropic_upstream_url",
        "embedding_base_url",
        "llm_base_url",
        "summary_base_url",
    )
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return http_url(value)
