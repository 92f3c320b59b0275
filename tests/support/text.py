"""Shared test fixtures: tokens, embeddings and a scripted LLM.

Fixtures (any test may request them by name):

- `scripted_llm` — a `ScriptedLLM`: implements memlane's `LLM` protocol with a
  queue of answers. Queue strings (the completion text), `Completion` objects, or
  exceptions (raised, e.g. `LLMError("down")` to exercise a fallback) with
  `scripted_llm.push(...)` or `ScriptedLLM([...])`. Every call is recorded in
  `.calls` (`LLMCall`: messages, model, temperature, max_tokens, json_mode);
  `.prompts` lists the last message text of each call. When the queue is empty
  it answers `default` if set (e.g. `ScriptedLLM(default="{}")`), else raises
  `LLMError("scripted LLM: no answer queued")`, so an unexpected call fails loudly.
  Inject it with `Runtime(settings, store, _llm=scripted_llm)`.
- `hashing_embedder` — memlane's `HashingEmbedder` (256-d, deterministic, instant;
  similar only when texts share words). For unit tests that do not claim quality.
- `minilm_embedder` — the real default embedder (all-MiniLM-L6-v2 int8, shared per
  process; the first use loads it in ~1 s). For tests that claim retrieval quality.
- `tokenizer` — the real cl100k_base tokenizer.
- `no_network` — while active, any connection or name lookup other than loopback
  raises `NetworkUsed` (a process audit hook, nothing patched). Use it to prove a
  code path never downloads.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from memlane.config import Settings
from memlane.text.embeddings import HashingEmbedder, MiniLMEmbedder
from memlane.text.factory import make_embedder
from memlane.text.llm import Completion, LLMError
from memlane.text.tokens import BPETokenizer, get_tokenizer

Answer = str | Completion | BaseException


@dataclass(frozen=True)
class LLMCall:
    """One call a `ScriptedLLM` received."""

    messages: list[dict[str, Any]]
    model: str | None
    temperature: float
    max_tokens: int | None
    json_mode: bool


class ScriptedLLM:
    """An `LLM` that answers from a queue and records what it was asked."""

    def __init__(
        self,
        answers: Iterable[Answer] = (),
        *,
        default: Answer | None = None,
        model: str = "scripted",
    ) -> None:
        self.answers: deque[Answer] = deque(answers)
        self.default = default
        self.model = model
        self.calls: list[LLMCall] = []

    def push(self, *answers: Answer) -> ScriptedLLM:
        self.answers.extend(answers)
        return self

    @property
    def prompts(self) -> list[str]:
        """The last message's content of each call, in call order."""
        return [
            str(call.messages[-1].get("content", "")) if call.messages else ""
            for call in self.calls
        ]

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        self.calls.append(
            LLMCall([dict(m) for m in messages], model, temperature, max_tokens, json_mode)
        )
        if self.answers:
            answer = self.answers.popleft()
        elif self.default is not None:
            answer = self.default
        else:
            raise LLMError("scripted LLM: no answer queued")
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Completion):
            return answer
        return Completion(
            text=answer,
            model=model or self.model,
            prompt_tokens=sum(len(str(m.get("content", "")).split()) for m in messages),
            completion_tokens=len(answer.split()),
        )


@pytest.fixture
def scripted_llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def hashing_embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def minilm_embedder() -> MiniLMEmbedder:
    embedder = make_embedder(Settings(embedding_backend="minilm"))
    assert isinstance(embedder, MiniLMEmbedder)
    return embedder


@pytest.fixture(scope="session")
def tokenizer() -> BPETokenizer:
    return get_tokenizer("cl100k_base")


class NetworkUsed(AssertionError):
    """Raised inside code that reached for the network while `no_network` was active."""


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "0.0.0.0"})
_guard_depth = 0
_guard_lock = threading.Lock()
_hook_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _guard_depth == 0:
        return
    if event == "socket.getaddrinfo":
        host = args[0].decode() if isinstance(args[0], bytes) else args[0]
        if host is not None and str(host) not in _LOOPBACK:
            raise NetworkUsed(f"name lookup of {host!r} while the network is forbidden")
    elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        address = args[1]
        host = address[0] if isinstance(address, tuple) and address else None
        if host is not None and str(host) not in _LOOPBACK:
            raise NetworkUsed(f"connection to {address!r} while the network is forbidden")


@pytest.fixture
def no_network() -> Iterator[None]:
    global _guard_depth, _hook_installed
    with _guard_lock:
        if not _hook_installed:  # audit hooks cannot be removed: install once, gate by depth
            sys.addaudithook(_audit)
            _hook_installed = True
        _guard_depth += 1
    try:
        yield
    finally:
        with _guard_lock:
            _guard_depth -= 1
