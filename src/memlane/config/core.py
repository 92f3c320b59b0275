"""Settings every face needs: where data lives, where the proxy listens, what it talks to."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from memlane.config.fields import PositiveFloat, PositiveInt, SettingsPart


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


class CoreSettings(SettingsPart):
    home: Path = Path("~/.local/share/memlane")
    """Data home: database, session folders, memory files."""

    host: str = "127.0.0.1"
    """Address the proxy binds."""

    port: Annotated[int, Field(ge=0, le=65535)] = 8100
    """Port the proxy binds (0: any)."""

    workers: Annotated[int, Field(ge=1, le=64)] = 1
    """Processes serving the proxy's port on one store (about one per core for heavy traffic); one
    of them does the once-per-home work, a worker that dies is restarted."""

    upstream_url: str = "http://127.0.0.1:11434/v1"
    """OpenAI-compatible base URL requests are forwarded to."""

    upstream_api_key: SecretStr | None = None
    """Key sent upstream when the client sends none. Never stored or logged."""

    upstream_api_key_env: str | None = None
    """Name of the environment variable holding upstream_api_key (`memlane init` writes this, so
    config.toml never holds a key); used when upstream_api_key is not set."""

    anthropic_upstream_url: str = "https://api.anthropic.com"
    """Anthropic-compatible base URL (no /v1) that /v1/messages requests (Claude Code, the anthropic
    SDK) are forwarded to."""

    anthropic_api_key: SecretStr | None = None
    """Key sent as x-api-key to the Anthropic upstream when the client sends none. Never stored or
    logged."""

    anthropic_api_key_env: str | None = None
    """Name of the environment variable holding anthropic_api_key; used when anthropic_api_key is
    not set."""

    upstream_timeout: PositiveFloat = 300.0
    """Seconds the upstream may stay silent (before its first byte, or between two reads) before the
    request fails; Codex CLI's own stream idle timeout is the same 300 s."""

    upstream_deadline: PositiveFloat = 1800.0
    """Seconds one upstream request may take in all, however steadily it sends (an SSE comment every
    few seconds would otherwise hold it open for ever)."""

    request_wait_seconds: PositiveFloat = 10.0
    """Longest memlane waits on its own work for one request, all of it together (its
    session's earlier turns, a store write, a read through a worker thread, a token count);
    past it the request goes on without that work, answered as usual, and the overrun is
    logged and recorded. The upstream has its own timeout."""

    shutdown_grace_seconds: PositiveInt = 30
    """Seconds (whole) a graceful stop lets the requests in flight finish. A request still
    waiting on its upstream then is stopped: its client gets a 503 in its wire format (the
    SDKs send it again) or, mid-stream, an error event, and its turn is recorded as failed."""

    shutdown_drain_seconds: Annotated[float, Field(ge=0)] = 5.0
    """Seconds a graceful stop gives queued memory work to finish; what is left is resumed
    from the store at the next start."""

    store_url: str | None = None
    """postgresql://… selects PostgreSQL; empty means the SQLite file in home."""

    sqlite_synchronous: Literal["normal", "full"] = "normal"
    """normal survives a process crash; full also survives power loss (slower)."""

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log verbosity."""

    embedding_backend: Literal["minilm", "openai", "hashing"] = "minilm"
    """minilm: the packaged all-MiniLM-L6-v2 (offline); openai: an OpenAI-compatible /v1/embeddings
    endpoint; hashing: a tiny deterministic embedder."""

    embedding_model: str = "all-MiniLM-L6-v2"
    """Model name sent to the embeddings endpoint (openai backend)."""

    embedding_base_url: str | None = None
    """Embeddings endpoint; empty means upstream_url."""

    embedding_api_key: SecretStr | None = None
    """Key for the embeddings endpoint; empty means upstream_api_key, then the OPENAI_API_KEY
    environment variable."""

    llm_provider: Literal["auto", "openai", "anthropic"] = "auto"
    """The API memlane's own LLM calls (facts, summaries, session ask) speak. auto: each call
    goes where the client request that caused it went (its upstream, API and key: Anthropic
    Messages for Claude Code, chat completions for the others; without a request, as openai).
    openai (chat completions at llm_base_url, else upstream_url) or anthropic (Messages at
    llm_base_url, else anthropic_upstream_url; the key llm_api_key, else anthropic_api_key, else
    ANTHROPIC_API_KEY, else the key a Claude Code request carries) pin them."""

    llm_model: str | None = None
    """Model memlane's own LLM calls use; empty means the model of the request that caused the call
    (the CLI and the library need one)."""

    llm_base_url: str | None = None
    """Base URL of memlane's own LLM calls (summaries, facts, metadata); empty means the upstream of
    the request that caused the call (llm_provider auto), else upstream_url. Set, it pins them."""

    llm_api_key: SecretStr | None = None
    """Key for memlane's own LLM calls; empty means the key of the request that caused the call,
    else upstream_api_key, then the OPENAI_API_KEY environment variable. Set, it pins them to
    llm_provider's upstream. Never stored or logged."""

    llm_timeout: PositiveFloat = 120.0
    """Seconds memlane's own LLM calls may take before failing."""

    summary_model: str | None = None
    """A dedicated (cheaper) model for summaries; empty means llm_model or the model of the request
    being summarised."""

    summary_base_url: str | None = None
    """Base URL of the summary model; empty means llm_base_url, then upstream_url."""

    tokenizer: Literal["auto", "cl100k_base", "o200k_base"] = "auto"
    """auto: the encoding of the model named in the request (o200k_base for the gpt-4o/4.1/5 and
    o-series families, cl100k_base for gpt-4/3.5, and cl100k_base for models it does not know, e.g.
    local ones); or force one encoding for every model."""

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
