"""Windows stated by an upstream's model list, and the defaults real clients need."""

from __future__ import annotations

from memlane.config import Settings
from memlane.engine.governance.budget import (
    Budget,
    context_window,
    learn_window,
    remember_listed_windows,
    windows_in_model_list,
)
from memlane.store.sqlite import SQLiteStore


def test_model_lists_of_local_servers_state_their_windows() -> None:
    payload = {
        "object": "list",
        "data": [
            {"id": "Qwen/Qwen3-8B", "object": "model", "max_model_len": 32_768},  # vLLM
            {"id": "qwen3-coder", "context_length": 262_144},  # LM Studio, OpenRouter
            {"id": "gguf-model", "meta": {"n_ctx_train": 65_536}},  # llama.cpp
            {"id": "claude-x", "max_input_tokens": 200_000},  # Anthropic
            {"id": "gpt-4o", "object": "model", "owned_by": "openai"},  # states none
            {"id": "tiny", "context_length": 512},  # not a window
            {"id": "flag", "context_length": True},
            "not an entry",
        ],
    }
    assert windows_in_model_list(payload) == {
        "Qwen/Qwen3-8B": 32_768,
        "qwen3-coder": 262_144,
        "gguf-model": 65_536,
        "claude-x": 200_000,
    }
    assert windows_in_model_list({"error": "nope"}) == {}
    assert windows_in_model_list(None) == {}


def test_a_listed_window_is_used_after_config_and_errors_but_before_the_table(
    sqlite_store: SQLiteStore,
) -> None:
    settings = Settings()
    remember_listed_windows(sqlite_store, {"llama3.1": 16_384, "my-server-model": 65_536})
    assert context_window(settings, sqlite_store, "llama3.1:8b").tokens == 16_384
    listed = context_window(settings, sqlite_store, "my-server-model")
    assert (listed.tokens, listed.source) == (65_536, "upstream")
    configured = Settings(governance_context_windows={"my-server-model": 9_000})
    assert context_window(configured, sqlite_store, "my-server-model").source == "config"

    learn_window(settings, sqlite_store, "my-server-model", "maximum context length is 40000")
    remember_listed_windows(sqlite_store, {"my-server-model": 65_536})  # the next start-up
    learned = context_window(settings, sqlite_store, "my-server-model")
    assert (learned.tokens, learned.source) == (40_000, "learned")


def test_the_default_clients_models_have_their_real_windows() -> None:
    settings = Settings()
    assert context_window(settings, None, "gpt-6.1-sol").tokens == 272_000  # Codex 0.169
    assert context_window(settings, None, "gpt-6.1-terra").tokens == 500_000
    assert context_window(settings, None, "gpt-5.5").tokens == 272_000
    assert context_window(settings, None, "claude-opus-5-5").tokens == 200_000  # Claude Code
    unknown = context_window(settings, None, "someones-finetune")
    assert (unknown.tokens, unknown.source) == (131_072, "default")


def test_a_self_compacting_client_is_compacted_only_past_its_usable_window() -> None:
    settings = Settings()
    window = context_window(settings, None, "claude-opus-5-5")
    own = Budget.of(settings, window)
    deferring = Budget.of(settings, window, client_compacts=True)
    assert own.threshold < deferring.threshold == deferring.limit == own.limit
    assert deferring.target == own.target
    off = Settings(governance_defer_to_clients=False)
    assert Budget.of(off, window, client_compacts=True).threshold == own.threshold
    never = Settings(governance_compact_threshold=0)
    assert Budget.of(never, window, client_compacts=True).threshold == 0


def test_overflow_errors_of_local_servers_teach_the_window(sqlite_store: SQLiteStore) -> None:
    from memlane.engine.governance.budget import learn_from_upstream_error

    settings = Settings()
    llama_cpp = (
        b'{"error": {"code": 400, "message": "the request exceeds the available context size, '
        b'try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5120, '
        b'"n_ctx": 4096}}'
    )
    vllm = (
        b'{"object": "error", "message": "This model\'s maximum context length is 32768 tokens. '
        b'However, you requested 40000 tokens.", "type": "BadRequestError", "code": 400}'
    )
    assert learn_from_upstream_error(settings, sqlite_store, "gguf-local", 400, llama_cpp) == 4096
    assert learn_from_upstream_error(settings, sqlite_store, "Qwen/Qwen3-8B", 400, vllm) == 32768
    learned = context_window(settings, sqlite_store, "gguf-local")
    assert (learned.tokens, learned.source) == (4096, "learned")
