"""The engine's shared services, built once per process and passed down explicitly."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from memlane.config import Settings
from memlane.engine.activity import Activity
from memlane.engine.background import Background
from memlane.store import Store
from memlane.text.embeddings import Embedder
from memlane.text.llm import LLM, ClientPool
from memlane.text.tokens import Tokenizer


@dataclass
class Runtime:
    """Settings, store and text services; what every engine function receives first.

    The tokenizer, embedder and LLM are created on first use by their factories,
    so a command that never embeds never loads the embedding model.
    """

    settings: Settings
    store: Store
    background: Background = field(default_factory=Background)
    activity: Activity = field(default_factory=Activity)
    _tokenizer: Tokenizer | None = None
    _embedder: Embedder | None = None
    _llm: LLM | None = None
    llm_clients: ClientPool | None = None
    """Open HTTP clients for memlane's own LLM calls, set by a long-running process (the
    proxy) that closes them at its end; None: each call opens its own."""

    @cached_property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is not None:
            return self._tokenizer
        from memlane.text.factory import make_tokenizer

        return make_tokenizer(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        from memlane.text.factory import make_embedder

        return make_embedder(self.settings)

    @cached_property
    def llm(self) -> LLM:
        if self._llm is not None:
            return self._llm
        from memlane.text.factory import make_llm

        return make_llm(self.settings, clients=self.llm_clients)

    def close(self) -> None:
        self.store.close()
