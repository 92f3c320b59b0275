"""How many tokens a request may use: the model's window, and the shares of it.

The window comes, in order, from the configuration (`governance_context_windows`),
from what an upstream taught memlane with a `context_length_exceeded` error
(kept in the store's meta table), from the upstream's own model list (`/v1/models`
metadata such as `context_length` or `max_model_len`, read at start-up off the request
path and kept in the same table), from the built-in table below, and last from
`governance_default_window` (128k: an unknown model is never squeezed into a small guess).
Keys match a model by name or by prefix, after a
provider prefix (`openai/`) and a tag (`:8b`) are ignored; the longest key wins.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memlane.config import Settings
from memlane.store import MetaStore

WindowSource = Literal["config", "learned", "upstream", "table", "default"]

KNOWN_WINDOWS: Mapping[str, int] = {
    # Codex CLI 0.169's catalog (its default model is gpt-6.1-sol)
    "gpt-6": 272_000,
    "gpt-6.1-terra": 500_000,
    "gpt-daybreak-red": 372_000,
    "gpt-daybreak": 272_000,
    "codex-auto-review": 272_000,
    "gpt-5": 272_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "codex-mini": 200_000,
    "claude": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama3": 8_192,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "mistral": 32_768,
    "mixtral": 32_768,
    "deepseek": 128_000,
    "gemma3": 131_072,
    "phi4": 16_384,
}
"""Input windows of well-known model families (tokens). Override any in the configuration."""

LONG_CONTEXT_TAG = "[1m]"
"""A model name ending in this (Claude Code's `sonnet[1m]`, or memlane's own mark for a
request with Anthropic's 1M-context beta) has a window of `LONG_CONTEXT_WINDOW` tokens."""
LONG_CONTEXT_WINDOW = 1_000_000

LEARNED_PREFIX = "governance.window."
"""Store meta key prefix of windows learned from upstream errors (`"123000"`) or stated by
the upstream's model list (`"123000 listed"`): one key per model, so a turn reads one value."""
LISTED_MARK = " listed"

WINDOW_FIELDS = (
    "context_length",
    "max_model_len",
    "context_window",
    "max_context_length",
    "max_input_tokens",
    "context_size",
    "n_ctx",
    "n_ctx_train",
)
"""Fields of a `/v1/models` entry that state its window: OpenRouter and LM Studio's
`context_length`, vLLM's `max_model_len`, others' `context_window`, Anthropic's
`max_input_tokens`, llama.cpp's `meta.n_ctx_train`. The first one present wins."""

_WINDOW_IN_ERROR = re.compile(
    r"(?:maximum context length|context (?:window|length|size)|max(?:imum)? (?:input )?tokens)"
    r"\D{0,40}?(\d[\d,_]{2,})",
    re.IGNORECASE,
)
_ANTHROPIC_WINDOW = re.compile(r"\d[\d,_]* tokens > (\d[\d,_]{2,}) maximum", re.IGNORECASE)
"""Anthropic's wording: `prompt is too long: 208310 tokens > 200000 maximum`."""
_LLAMA_CPP_WINDOW = re.compile(r'"n_ctx"\s*:\s*(\d{4,})')
"""llama.cpp's `exceed_context_size_error` states the window only as a field: `"n_ctx": 4096`."""


SELF_COMPACTING = re.compile(r"(?<![a-z])(codex|claude-cli)(?![a-z])", re.IGNORECASE)
"""Clients that compact their own history before their window fills, by the name they give
(User-Agent, Codex's `originator`): Codex CLI (near 90% of the window its catalog states)
and Claude Code (its auto-compact)."""


def compacts_itself(agent: str) -> bool:
    """Whether `agent` (a User-Agent or client name) summarises its own history."""
    return bool(SELF_COMPACTING.search(agent))


SHARE_DIVISOR = 6
"""The summary, the recall snippets and one tool result each take at most 1/6 of the target."""


@dataclass(frozen=True, slots=True)
class Window:
    tokens: int
    source: WindowSource

    @property
    def known(self) -> bool:
        """A default window is a guess: requests are fitted to it but never refused by it."""
        return self.source != "default"


@dataclass(frozen=True, slots=True)
class Budget:
    """The token figures of one request, all derived from the window and the settings."""

    window: Window
    margin: int
    limit: int
    """What the request may use: the window minus the room kept for the answer."""
    threshold: int
    """Above this a compaction starts (0: never)."""
    target: int
    """What a compaction brings the request down to."""
    tail: int
    """The verbatim recent tail's share; the tail gets at least this, and whatever room the
    head and the snapshot leave up to the target."""
    summary: int = 0
    """Tokens the middle's summary may take (a share of the target on a small window)."""
    recall: int = 0
    """Tokens kept for re-injected snippets of dropped history."""
    tool_output: int = 0
    """A tool result above this many tokens is masked once it is old."""

    @classmethod
    def of(cls, settings: Settings, window: Window, *, client_compacts: bool = False) -> Budget:
        """`client_compacts`: the client keeps its own history inside the window (Codex,
        Claude Code); with `governance_defer_to_clients` memlane then compacts only what
        would not fit at all, so the client's compaction runs first and once."""
        margin = min(settings.governance_safety_margin, window.tokens // 4)
        limit = window.tokens - margin
        threshold = int(limit * settings.governance_compact_threshold)
        if client_compacts and settings.governance_defer_to_clients and threshold:
            threshold = limit
        target = int(limit * settings.governance_compact_target)
        tail = min(int(limit * settings.governance_tail_share), target)
        # On a small window the fixed allowances would eat the target: each is capped to a
        # share of it, so the recent tail is never starved (8k: ~0.5k summary, not 1.5k).
        summary = min(settings.governance_summary_max_tokens, target // SHARE_DIVISOR)
        recall = min(settings.governance_recall_chars // 3, target // SHARE_DIVISOR)
        tool_output = min(settings.governance_tool_output_limit, target // SHARE_DIVISOR)
        return cls(window, margin, limit, threshold, target, tail, summary, recall, tool_output)


def bare_model(model: str) -> str:
    """`openai/gpt-4o` → `gpt-4o`, `llama3.1:8b` → `llama3.1`, lower case."""
    return model.rsplit("/", 1)[-1].split(":", 1)[0].strip().lower()


def _lookup(table: Mapping[str, int], model: str) -> int | None:
    bare = bare_model(model)
    best: tuple[int, int] | None = None
    for key, tokens in table.items():
        candidate = bare_model(key)
        if (bare == candidate or bare.startswith(candidate)) and (
            best is None or len(candidate) > best[0]
        ):
            best = (len(candidate), tokens)
    return best[1] if best else None


@lru_cache(maxsize=256)
def _known_window(model: str) -> int | None:
    """`KNOWN_WINDOWS`' entry for `model`: asked on every request, and a table scan."""
    return _lookup(KNOWN_WINDOWS, model)


WINDOW_MEMO_SECONDS = 30.0
"""How long a process trusts a learned window it read: a window another process learns
(`serve --workers`, a replica on PostgreSQL) is heard within this; one this process
learns, at once. An agent sends a request every few seconds: at one second, nearly every
request read the store for a value that changes only when an upstream refuses an
overflow, in front of the forward, where code that last ran a moment ago runs 4-10
times slower than warm (`benchmarks/cold_paths.py`). Until another process's window is
heard, a request over it is refused by the upstream once more, and that teaches this
process too."""


class WindowMemo:
    """The store's meta values (learned windows), each read at most once per
    `WINDOW_MEMO_SECONDS`; writes go through, and are remembered at once.

    Every governed turn looks its model's window up, in front of the request: a store
    read of about 0.08 ms warm (several times that for a request after a pause) for a
    value that changes only when an upstream refuses an overflow (`learn_window`, through
    this memo in the proxy).
    """

    def __init__(
        self,
        store: MetaStore,
        *,
        seconds: float = WINDOW_MEMO_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.seconds = seconds
        self.clock = clock
        self._read: dict[str, tuple[str | None, float]] = {}

    def get_meta(self, key: str) -> str | None:
        now = self.clock()
        known = self._read.get(key)
        if known is not None and now - known[1] < self.seconds:
            return known[0]
        value = self.store.get_meta(key)
        self._read[key] = (value, now)
        return value

    def set_meta(self, key: str, value: str) -> None:
        self.store.set_meta(key, value)
        self._read[key] = (value, self.clock())

    def claim_meta(self, key: str, value: str) -> str:
        held = self.store.claim_meta(key, value)
        self._read[key] = (held, self.clock())
        return held


def context_window(settings: Settings, store: MetaStore | None, model: str) -> Window:
    configured = _lookup(settings.governance_context_windows, model)
    if configured is not None:
        return Window(configured, "config")
    if store is not None and model:
        stored = _stored_window(store.get_meta(LEARNED_PREFIX + bare_model(model)))
        if stored is not None:
            return stored
    if bare_model(model).endswith(LONG_CONTEXT_TAG):
        return Window(LONG_CONTEXT_WINDOW, "table")
    known = _known_window(model)
    if known is not None:
        return Window(known, "table")
    return Window(settings.governance_default_window, "default")


def _stored_window(value: str | None) -> Window | None:
    if not value:
        return None
    if value.endswith(LISTED_MARK) and value.removesuffix(LISTED_MARK).isdigit():
        return Window(int(value.removesuffix(LISTED_MARK)), "upstream")
    return Window(int(value), "learned") if value.isdigit() else None


def window_from_error(message: str) -> int | None:
    """The window an upstream's `context_length_exceeded` message states, if it states one."""
    match = (
        _LLAMA_CPP_WINDOW.search(message)
        or _WINDOW_IN_ERROR.search(message)
        or _ANTHROPIC_WINDOW.search(message)
    )
    if match is None:
        return None
    tokens = int(re.sub(r"[,_]", "", match.group(1)))
    return tokens if tokens >= 1_024 else None


def learn_window(
    settings: Settings,
    store: MetaStore,
    model: str,
    message: str,
    *,
    sent_tokens: int | None = None,
) -> int | None:
    """Remember the window an upstream refused a request with; the next request fits it.

    The proxy calls this on an upstream `context_length_exceeded` error. When the
    message names no number, the window is taken as 90% of what was just sent
    (and never raised). Returns the window now in force, or None if nothing
    could be learned.
    """
    if not model:
        return None
    learned = window_from_error(message)
    current = context_window(settings, store, model)
    if learned is None and sent_tokens:
        learned = max(1_024, int(sent_tokens * 0.9))
    if learned is None:
        return None
    if current.source == "learned":
        learned = min(learned, current.tokens)
    store.set_meta(LEARNED_PREFIX + bare_model(model), str(learned))
    return learned


_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "exceed_context_size",
    "context length",
    "context window",
    "too many tokens",
    "maximum context",
    "context size",
    "prompt is too long",
)


def learn_from_upstream_error(
    settings: Settings, store: MetaStore, model: str, status: int, body: bytes
) -> int | None:
    """The proxy's hook for an upstream error: learn the window if it was an overflow."""
    if status not in (400, 413, 422) or not model:
        return None
    text = body[:20_000].decode("utf-8", errors="replace")
    if not any(hint in text.lower() for hint in _OVERFLOW_HINTS):
        return None
    return learn_window(settings, store, model, text)


def windows_in_model_list(payload: object) -> dict[str, int]:
    """`{model: window}` from a `/v1/models` answer, for the entries that state one.

    Accepts the OpenAI shape (`{"data": [{"id": …, …}]}`), a bare list, and the
    fields of `WINDOW_FIELDS` at the top of an entry or one level down (`meta`,
    `top_provider`). A value below 1,024 tokens is not a window.
    """
    entries = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(entries, list):
        return {}
    found: dict[str, int] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        tokens = _stated_window(entry)
        if tokens is not None:
            found[entry["id"]] = tokens
    return found


def _stated_window(entry: Mapping[str, object]) -> int | None:
    places = [entry, *(v for v in entry.values() if isinstance(v, dict))]
    for name in WINDOW_FIELDS:
        for place in places:
            value = place.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1_024:
                return value
    return None


def remember_listed_windows(store: MetaStore, windows: Mapping[str, int]) -> None:
    """Keep the windows an upstream's model list states, for `context_window` to read; a
    window an overflow error taught stays (the upstream refused a request at it)."""
    for model, tokens in windows.items():
        key = LEARNED_PREFIX + bare_model(model)
        held = _stored_window(store.get_meta(key))
        if held is None or held.source == "upstream":
            store.set_meta(key, f"{tokens}{LISTED_MARK}")
