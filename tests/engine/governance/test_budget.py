from __future__ import annotations

from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.governance.budget import (
    LEARNED_PREFIX,
    WINDOW_MEMO_SECONDS,
    Budget,
    WindowMemo,
    bare_model,
    context_window,
    learn_window,
    window_from_error,
)
from memlane.store.sqlite import SQLiteStore


def test_known_models_match_by_longest_prefix_ignoring_provider_and_tag() -> None:
    settings = Settings()
    assert context_window(settings, None, "gpt-4o-mini").tokens == 128_000
    assert context_window(settings, None, "openai/gpt-4.1-nano").tokens == 1_047_576
    assert context_window(settings, None, "gpt-4").tokens == 8_192
    assert context_window(settings, None, "llama3.1:8b").tokens == 131_072
    assert context_window(settings, None, "llama3:8b").source == "table"
    assert bare_model("ollama/Qwen2.5:7B") == "qwen2.5"


def test_an_unknown_model_gets_the_default_window_and_is_never_refused_by_it() -> None:
    window = context_window(Settings(governance_default_window=16_000), None, "my-local-model")
    assert (window.tokens, window.source, window.known) == (16_000, "default", False)


def test_configuration_overrides_the_table_and_accepts_text_from_the_environment() -> None:
    settings = Settings(governance_context_windows="gpt-4o=50000, my-local=9000")
    assert context_window(settings, None, "gpt-4o-2024-08-06").tokens == 50_000
    assert context_window(settings, None, "my-local:latest").source == "config"


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9001 tokens.",
            8192,
        ),
        ("Input exceeds the context window of 131,072 tokens", 131_072),
        ("the request exceeds the available context size (4096 tokens)", 4096),
        ("context too long", None),
    ],
)
def test_windows_are_read_from_upstream_errors(message: str, tokens: int | None) -> None:
    assert window_from_error(message) == tokens


def test_an_upstream_error_teaches_the_window_and_it_is_kept(sqlite_store: SQLiteStore) -> None:
    settings = Settings()
    message = "maximum context length is 4096 tokens"
    assert learn_window(settings, sqlite_store, "llama3.1:8b", message) == 4096
    window = context_window(settings, sqlite_store, "llama3.1:70b")
    assert (window.tokens, window.source) == (4096, "learned")
    # An error without a number shrinks to 90% of what was sent, never grows.
    assert learn_window(settings, sqlite_store, "llama3.1", "too long", sent_tokens=3000) == 2700
    assert learn_window(settings, sqlite_store, "llama3.1", "too long", sent_tokens=9000) == 2700
    assert learn_window(settings, sqlite_store, "llama3.1", "too long") is None


@pytest.fixture
def reads(sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The meta keys the store is asked for, in order."""
    asked: list[str] = []
    get_meta = sqlite_store.get_meta

    def counted(key: str) -> str | None:
        asked.append(key)
        return get_meta(key)

    monkeypatch.setattr(sqlite_store, "get_meta", counted)
    return asked


def test_a_learned_window_is_read_once_per_memo_and_learning_is_heard_at_once(
    sqlite_store: SQLiteStore, reads: list[str]
) -> None:
    """Governance looks the window up on every turn: from the store at most once per
    `WINDOW_MEMO_SECONDS` per model, so an agent's requests, seconds apart, do not read
    it each time; a window this process learns counts from its next request, one another
    process learns once the memo runs out."""
    settings = Settings()
    now = [100.0]
    memo = WindowMemo(sqlite_store, clock=lambda: now[0])
    assert context_window(settings, memo, "llama3.1").source == "table"
    for _ in range(5):  # an agent at work: a request every few seconds
        now[0] += 5.0
        assert context_window(settings, memo, "llama3.1").source == "table"
    assert len(reads) == 1
    assert learn_window(settings, memo, "llama3.1", "maximum context length is 4096") == 4096
    assert context_window(settings, memo, "llama3.1").tokens == 4096  # at once
    sqlite_store.set_meta(reads[0], "8192")  # another process learns another
    now[0] += WINDOW_MEMO_SECONDS - 1.0
    assert context_window(settings, memo, "llama3.1").tokens == 4096
    now[0] += 1.0
    assert context_window(settings, memo, "llama3.1").tokens == 8192
    assert len(reads) == 2
    assert context_window(settings, sqlite_store, "llama3.1").tokens == 8192  # kept in the store


def test_budget_shares_follow_the_settings() -> None:
    settings = Settings(governance_safety_margin=1_000)
    budget = Budget.of(settings, context_window(settings, None, "gpt-4"))
    assert budget.limit == 8_192 - 1_000
    assert budget.threshold == int(budget.limit * 0.8)
    assert budget.target == int(budget.limit * 0.5)
    assert budget.tail == int(budget.limit * 0.3)
    small = Budget.of(Settings(), context_window(Settings(), None, "gpt-4"))
    assert small.margin == 2_048  # capped at a quarter of the window


def test_target_must_stay_below_the_threshold() -> None:
    with pytest.raises(ValueError, match="below"):
        Settings(governance_compact_threshold=0.5, governance_compact_target=0.6)
    Settings(governance_compact_threshold=0, governance_compact_target=0.6)  # compaction off


def test_anthropics_prompt_too_long_states_the_window() -> None:
    message = "prompt is too long: 208,310 tokens > 200000 maximum"
    assert window_from_error(message) == 200_000


def test_each_turn_finds_its_window_through_the_runtimes_memo(
    sqlite_store: SQLiteStore, reads: list[str], tmp_path: Path
) -> None:
    from memlane.engine.governance.setup import governor_for_turn
    from memlane.engine.runtime import Runtime
    from memlane.engine.turn import Turn
    from memlane.types import Message

    rt = Runtime(Settings(home=tmp_path, embedding_backend="hashing"), sqlite_store)
    turn = Turn(
        key="s", namespace="s", model="llama3.1", wire="chat", messages=[Message("user", "hi")]
    )
    windows = {governor_for_turn(rt, turn).budget.window.tokens for _ in range(3)}
    assert windows == {context_window(Settings(), None, "llama3.1").tokens}
    assert reads == [LEARNED_PREFIX + "llama3.1"]
