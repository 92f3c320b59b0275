"""The factory picks services from Settings: the same door for defaults and options."""

from __future__ import annotations

from pydantic import SecretStr

from memlane.config import Settings
from memlane.text.embeddings import HashingEmbedder, MiniLMEmbedder, OpenAIEmbedder
from memlane.text.factory import make_embedder, make_llm, make_tokenizer
from memlane.text.llm import LLMRoute, OpenAICompatibleLLM
from memlane.text.llm_anthropic import AnthropicLLM
from memlane.text.llm_route import RequestRoutedLLM


def test_tokenizer_follows_the_model() -> None:
    settings = Settings()
    assert make_tokenizer(settings, "gpt-4o").name == "o200k_base"
    assert make_tokenizer(settings, "gpt-4").name == "cl100k_base"
    assert make_tokenizer(settings, "llama3.2").name == "cl100k_base"
    assert make_tokenizer(settings).name == "cl100k_base"


def test_tokenizer_uses_llm_model_when_no_model_given() -> None:
    assert make_tokenizer(Settings(llm_model="gpt-4.1-mini")).name == "o200k_base"


def test_tokenizer_setting_forces_one_encoding() -> None:
    settings = Settings(tokenizer="o200k_base")
    assert make_tokenizer(settings, "gpt-3.5-turbo").name == "o200k_base"
    assert make_tokenizer(settings, "llama3.2").name == "o200k_base"


def test_embedder_backends() -> None:
    assert isinstance(make_embedder(Settings(embedding_backend="hashing")), HashingEmbedder)
    minilm = make_embedder(Settings())
    assert isinstance(minilm, MiniLMEmbedder)
    assert make_embedder(Settings()) is minilm  # one model per process
    endpoint = make_embedder(
        Settings(embedding_backend="openai", embedding_model="nomic-embed-text")
    )
    assert isinstance(endpoint, OpenAIEmbedder)
    assert endpoint.model_id == "openai:nomic-embed-text"


def llm(settings: Settings, purpose: str = "default", **env: str) -> OpenAICompatibleLLM:
    """The configured client (the one a call no request caused uses)."""
    client = make_llm(settings, purpose=purpose, environ=env)
    if isinstance(client, RequestRoutedLLM):
        client = client.for_route(None)
    assert isinstance(client, OpenAICompatibleLLM)
    return client


def test_llm_defaults_to_the_upstream() -> None:
    client = llm(Settings(upstream_url="http://up.test/v1"))
    assert client.base_url == "http://up.test/v1"
    assert client.default_model is None


def test_llm_base_url_and_model_override_the_upstream() -> None:
    settings = Settings(
        upstream_url="http://up.test/v1", llm_base_url="http://own.test/v1", llm_model="m1"
    )
    client = llm(settings)
    assert (client.base_url, client.default_model) == ("http://own.test/v1", "m1")
    # without a summary model, summaries use the same client settings
    summary = llm(settings, "summary")
    assert (summary.base_url, summary.default_model) == ("http://own.test/v1", "m1")


def test_summary_purpose_uses_the_dedicated_model_and_url() -> None:
    settings = Settings(
        llm_model="big",
        summary_model="small",
        summary_base_url="http://cheap.test/v1",
        upstream_url="http://up.test/v1",
    )
    summary = llm(settings, "summary")
    assert (summary.base_url, summary.default_model) == ("http://cheap.test/v1", "small")
    facts = llm(settings, "facts")
    assert (facts.base_url, facts.default_model) == ("http://up.test/v1", "big")


def test_llm_key_precedence() -> None:
    own = Settings(llm_api_key=SecretStr("k-own"), upstream_api_key=SecretStr("k-up"))
    assert llm(own, OPENAI_API_KEY="k-env")._headers["Authorization"] == "Bearer k-own"
    upstream = Settings(upstream_api_key=SecretStr("k-up"))
    assert llm(upstream, OPENAI_API_KEY="k-env")._headers["Authorization"] == "Bearer k-up"
    assert llm(Settings(), OPENAI_API_KEY="k-env")._headers["Authorization"] == "Bearer k-env"
    assert "Authorization" not in llm(Settings())._headers


def test_llm_timeout_comes_from_settings() -> None:
    assert llm(Settings(llm_timeout=7.5))._timeout == 7.5


def test_the_anthropic_provider_talks_to_the_anthropic_upstream_with_its_keys() -> None:
    from memlane.text.factory import own_llm_credential_source
    from memlane.text.llm_anthropic import AnthropicLLM

    base = {"llm_provider": "anthropic", "anthropic_upstream_url": "http://claude.test"}
    client = make_llm(Settings(**base), environ={})
    assert isinstance(client, AnthropicLLM)
    assert client.base_url == "http://claude.test"
    assert client.borrow_request_key  # no key of its own: the Claude Code request's
    server = Settings(**base, anthropic_api_key=SecretStr("k-ant"), upstream_api_key=SecretStr("x"))
    keyed = make_llm(server, environ={"OPENAI_API_KEY": "k-openai"})
    assert keyed._headers == {"x-api-key": "k-ant"}  # never an OpenAI key
    assert not keyed.borrow_request_key
    env = make_llm(Settings(**base), environ={"ANTHROPIC_API_KEY": "k-env"})
    assert env._headers == {"x-api-key": "k-env"}
    assert own_llm_credential_source(server, {}) == "MEMLANE_ANTHROPIC_API_KEY"
    assert own_llm_credential_source(Settings(**base), {"ANTHROPIC_API_KEY": "k"}) == (
        "$ANTHROPIC_API_KEY"
    )
    elsewhere = make_llm(Settings(**base, llm_base_url="http://other.test"), environ={})
    assert not elsewhere.borrow_request_key  # a client's key goes only where it was sent


def test_by_default_own_calls_follow_each_requests_route_and_key() -> None:
    settings = Settings(upstream_url="http://up.test/v1", anthropic_api_key=SecretStr("k-ant"))
    routed = make_llm(settings, environ={"OPENAI_API_KEY": "k-openai"})
    assert isinstance(routed, RequestRoutedLLM)
    claude = routed.for_route(LLMRoute("anthropic", "http://claude.test"))
    assert isinstance(claude, AnthropicLLM)
    assert claude.base_url == "http://claude.test"
    assert claude.borrow_request_key  # the request's own key first...
    assert claude._headers == {"x-api-key": "k-ant"}  # ...else the one configured for it
    assert routed.for_route(LLMRoute("anthropic", "http://claude.test")) is claude  # reused
    codex = routed.for_route(LLMRoute("openai", "http://up.test/v1"))
    assert isinstance(codex, OpenAICompatibleLLM)
    assert codex.borrow_request_key
    assert codex._headers == {"Authorization": "Bearer k-openai"}  # never the Anthropic key
    assert routed.for_route(None) is routed.fallback  # no request: the configured client
    assert isinstance(routed.fallback, OpenAICompatibleLLM)


def test_a_configured_provider_url_or_key_pins_own_calls() -> None:
    from memlane.text.factory import follows_requests, own_llm_credential_source

    assert follows_requests(Settings())
    assert "each client request" in own_llm_credential_source(Settings(), {})
    for pinned in (
        Settings(llm_provider="openai"),
        Settings(llm_base_url="http://own.test/v1"),
        Settings(llm_api_key=SecretStr("k-own")),
    ):
        assert not follows_requests(pinned)
        assert isinstance(make_llm(pinned, environ={}), OpenAICompatibleLLM)
    summary = Settings(summary_base_url="http://cheap.test/v1")
    assert isinstance(make_llm(summary, purpose="summary", environ={}), OpenAICompatibleLLM)
    assert isinstance(make_llm(summary, environ={}), RequestRoutedLLM)
