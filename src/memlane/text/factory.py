"""Build the text services from `Settings`: the one door built-ins and options share.

Tokenizers and the MiniLM model are process-wide (loading them costs 0.1–1 s);
the LLM client and the endpoint embedder are cheap and built per call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from memlane.config import Settings
from memlane.text.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder, OpenAIEmbedder
from memlane.text.llm import HTTPLLM, LLM, ClientPool, LLMRoute, OpenAICompatibleLLM, Provider
from memlane.text.llm_anthropic import AnthropicLLM
from memlane.text.llm_route import RequestRoutedLLM
from memlane.text.tokens import Tokenizer, encoding_for_model, get_tokenizer

SUMMARY_PURPOSE = "summary"
"""The purpose that may use the dedicated summary model and base URL."""

_MINILM: MiniLMEmbedder | None = None
_MINILM_LOCK = threading.Lock()


def make_tokenizer(settings: Settings, model: str | None = None) -> Tokenizer:
    """The tokenizer for `model` (else `llm_model`), unless `tokenizer` forces one."""
    if settings.tokenizer != "auto":
        return get_tokenizer(settings.tokenizer)
    return get_tokenizer(encoding_for_model(model or settings.llm_model))


def make_embedder(settings: Settings) -> Embedder:
    """The embedder `embedding_backend` names; MiniLM is shared by the whole process."""
    if settings.embedding_backend == "hashing":
        return HashingEmbedder()
    if settings.embedding_backend == "openai":
        key = settings.embedding_api_key or settings.upstream_api_key
        return OpenAIEmbedder(
            settings.embedding_base_url or settings.upstream_url,
            settings.embedding_model,
            api_key=key.get_secret_value() if key else os.environ.get("OPENAI_API_KEY"),
        )
    return _shared_minilm()


def make_llm(
    settings: Settings,
    *,
    purpose: str = "default",
    environ: Mapping[str, str] | None = None,
    clients: ClientPool | None = None,
) -> LLM:
    """memlane's own LLM client.

    By default (`follows_requests`) each call goes where the client request that caused
    it went: the same upstream, the same API (Anthropic Messages for a Claude Code
    request, OpenAI chat completions for the others) and the same credential
    (`RequestRoutedLLM`); a call no request caused (the CLI, the library, work without
    a live request) takes the configured client below.

    Configured (`llm_provider`, `llm_base_url`, `llm_api_key`, or the summary purpose's
    `summary_base_url`): `llm_provider` picks the API: OpenAI-compatible chat
    completions, or Anthropic Messages. purpose "summary" prefers `summary_model` /
    `summary_base_url`; every purpose then falls back to `llm_model` / `llm_base_url`,
    then the provider's upstream (`upstream_url`, or `anthropic_upstream_url`). With no
    model configured, each call must name one (the proxy passes the request's).
    The key: `llm_api_key`, else `upstream_api_key`, else `$OPENAI_API_KEY`.
    `clients`: a pool of open HTTP sessions to reuse (a long-running process's).
    """
    env = os.environ if environ is None else environ
    summary = purpose == SUMMARY_PURPOSE
    pinned = _configured_llm(settings, summary=summary, environ=env, clients=clients)
    if (summary and settings.summary_base_url) or not follows_requests(settings):
        return pinned
    return RequestRoutedLLM(
        pinned,
        lambda route: _route_llm(settings, route, environ=env, clients=clients),
    )


def follows_requests(settings: Settings) -> bool:
    """Whether memlane's own calls follow each client request's route (the default), or
    go where the settings say: `llm_provider`, `llm_base_url` or `llm_api_key` set."""
    own_key = settings.llm_api_key is not None and bool(settings.llm_api_key.get_secret_value())
    return settings.llm_provider == "auto" and not settings.llm_base_url and not own_key


def _configured_llm(
    settings: Settings,
    *,
    summary: bool,
    environ: Mapping[str, str],
    clients: ClientPool | None,
) -> HTTPLLM:
    """The client the settings describe (see `make_llm`)."""
    upstream = _provider_upstream(settings)
    base_url = (settings.summary_base_url if summary else None) or settings.llm_base_url or upstream
    model = (settings.summary_model if summary else None) or settings.llm_model
    key = own_llm_key(settings, environ)
    kind = AnthropicLLM if settings.llm_provider == "anthropic" else OpenAICompatibleLLM
    return kind(
        base_url,
        api_key=key,
        default_model=model,
        timeout=settings.llm_timeout,
        borrow_request_key=key is None and base_url == upstream,
        clients=clients,
    )


def _route_llm(
    settings: Settings,
    route: LLMRoute,
    *,
    environ: Mapping[str, str],
    clients: ClientPool | None,
) -> HTTPLLM:
    """A client for a request's route: its upstream and API, the request's own key first
    (lent in memory), else the key configured for that upstream."""
    kind = AnthropicLLM if route.provider == "anthropic" else OpenAICompatibleLLM
    return kind(
        route.base_url,
        api_key=_provider_key(settings, route.provider, environ),
        default_model=settings.llm_model,
        timeout=settings.llm_timeout,
        borrow_request_key=True,
        clients=clients,
    )


def _provider_upstream(settings: Settings) -> str:
    """The upstream whose clients' keys memlane's own calls may borrow: the one that
    speaks `llm_provider`'s API."""
    if settings.llm_provider == "anthropic":
        return settings.anthropic_upstream_url
    return settings.upstream_url


def upstream_llm(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> OpenAICompatibleLLM:
    """A client for the upstream itself, as a client of memlane would talk to it (what
    `memlane chat` streams its conversation from): `upstream_url`, `upstream_api_key`
    else `$OPENAI_API_KEY`, `upstream_timeout`."""
    env = os.environ if environ is None else environ
    key = settings.upstream_api_key
    token = key.get_secret_value() if key else env.get("OPENAI_API_KEY")
    return OpenAICompatibleLLM(
        settings.upstream_url, api_key=token or None, timeout=settings.upstream_timeout
    )


def own_llm_key(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The key memlane's configured calls carry: `llm_api_key`, `upstream_api_key`,
    `$OPENAI_API_KEY` (with `llm_provider` anthropic: `anthropic_api_key`,
    `$ANTHROPIC_API_KEY`); None means each call borrows the key of the client request that
    caused it (when it goes to the same upstream)."""
    key = settings.llm_api_key
    if key is not None and key.get_secret_value():
        return str(key.get_secret_value())
    return _provider_key(settings, _provider(settings), environ)


def _provider(settings: Settings) -> Provider:
    return "anthropic" if settings.llm_provider == "anthropic" else "openai"


def _provider_key(
    settings: Settings, provider: Provider, environ: Mapping[str, str] | None = None
) -> str | None:
    """The key configured for `provider`'s upstream: its setting, else its variable."""
    env = os.environ if environ is None else environ
    name, variable = _key_sources(provider)
    key = getattr(settings, name)
    if key is not None and key.get_secret_value():
        return str(key.get_secret_value())
    return env.get(variable) or None


def _key_sources(provider: Provider) -> tuple[str, str]:
    """(the upstream key setting, the environment variable) of `provider`'s API."""
    if provider == "anthropic":
        return "anthropic_api_key", "ANTHROPIC_API_KEY"
    return "upstream_api_key", "OPENAI_API_KEY"


def own_llm_credential_source(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """Where memlane's own LLM calls get their key, in words (the serve report)."""
    env = os.environ if environ is None else environ
    if follows_requests(settings):
        return (
            "the key of each client request, sent where that request went (held in memory "
            "for its work); without one, the key configured for that upstream"
        )
    name, variable = _key_sources(_provider(settings))
    if settings.llm_api_key is not None and settings.llm_api_key.get_secret_value():
        return "MEMLANE_LLM_API_KEY"
    key = getattr(settings, name)
    if key is not None and key.get_secret_value():
        return f"MEMLANE_{name.upper()}"
    if env.get(variable):
        return f"${variable}"
    if settings.llm_base_url and settings.llm_base_url != _provider_upstream(settings):
        return f"none (calls to {settings.llm_base_url} carry no key)"
    return "the key each client request carries (held in memory for that request's work)"


def _shared_minilm() -> MiniLMEmbedder:
    global _MINILM
    with _MINILM_LOCK:
        if _MINILM is None:
            _MINILM = MiniLMEmbedder()
        return _MINILM
