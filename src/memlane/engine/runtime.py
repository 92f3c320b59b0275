"""The engine's shared services, built once per process and passed down explicitly.

Every service a stage needs comes from here, made the one way it is made: the store
kind, the tokenizers, the embedder, memlane's own LLM clients and the rule for which
model their calls use, and the memory book. Nothing below builds its own.

Which client and model memlane's own LLM calls use (`llm`: by default the upstream,
API and key of the client request that caused the call, `text.llm_route`; with none,
or when `llm_provider`, `llm_base_url` or `llm_api_key` pin it, `llm_base_url`, else
the provider's upstream):

- running summaries, governance's summariser, session metadata and queries:
  `summary_llm` (`summary_base_url` when set, else `llm`), with the feature's own
  model if it has one (`index_model`), else `summary_model`, `llm_model`, the
  request's model (`summary_model()`);
- fact extraction, reconciliation and the memory summary: `llm`, with
  `memory_llm_model`, `llm_model`, the request's model (`memory_model()`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from memlane.config import Settings
from memlane.engine.activity import Activity
from memlane.engine.background import Background
from memlane.store import Store
from memlane.store.urls import StoreKind, store_kind
from memlane.text.embeddings import Embedder
from memlane.text.llm import LLM, ClientPool
from memlane.text.tokens import Tokenizer

if TYPE_CHECKING:
    from memlane.engine.governance.budget import WindowMemo
    from memlane.engine.memory.book import MemoryBook
    from memlane.engine.memory.stale import ProjectChecks
    from memlane.engine.writes import Writes


@dataclass
class Runtime:
    """Settings, store and text services; what every engine function receives first.

    The tokenizer, embedder and LLM are created on first use by their factories,
    so a command that never embeds never loads the embedding model. Tests and
    library users inject their own through `_tokenizer`, `_embedder` and `_llm`.
    """

    settings: Settings
    store: Store
    background: Background = field(default_factory=Background)
    activity: Activity = field(default_factory=Activity)
    _tokenizer: Tokenizer | None = None
    _embedder: Embedder | None = None
    _llm: LLM | None = None
    llm_clients: ClientPool | None = None
    """Open HTTP sessions (one per event loop) for memlane's own LLM calls, set by a
    long-running process (the proxy) that closes them at its end; None: each call opens
    its own."""
    primary: bool = True
    """Whether this process does the once-per-home work: catching the memory index up
    with the files at start and watching them. False in every `serve --workers` process
    but the first; those write under the home's locks like the CLI beside a proxy."""
    _memory_book: MemoryBook | None = field(default=None, init=False, repr=False)

    @cached_property
    def writes(self) -> Writes:
        """The request path's write queue: one writer thread for the store, committing
        every request's writes in batches (`engine.writes`)."""
        from memlane.engine.writes import Writes

        return Writes(self.store, limit=self.settings.request_wait_seconds)

    @cached_property
    def serves_alone(self) -> bool:
        """Whether every turn of this store's sessions is taken by this process: one worker
        on SQLite. Then the order of its write queue (`engine.writes`) is the sessions'
        order, and a client that resends its history may have an answer before its turn
        is stored. Another process (`serve --workers`, a replica on PostgreSQL) may take a
        session's next turn from the store alone: it must find the turn there."""
        return self.store_kind == "sqlite" and self.settings.workers == 1

    @cached_property
    def store_kind(self) -> StoreKind:
        """`sqlite` (memories and scaffold texts as files) or `postgres` (all in the database)."""
        return store_kind(self.settings.store_url) or "sqlite"

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer of `llm_model` (or the one `tokenizer` forces): what stored turns
        are counted with."""
        return self.tokenizer_for(None)

    def tokenizer_for(self, model: str | None) -> Tokenizer:
        """The tokenizer that counts `model`'s tokens (governance counts each request's
        model). Loaded once per encoding for the whole process."""
        if self._tokenizer is not None:
            return self._tokenizer
        from memlane.text.factory import make_tokenizer

        return make_tokenizer(self.settings, model or None)

    @cached_property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        from memlane.text.factory import make_embedder

        return make_embedder(self.settings)

    @cached_property
    def llm(self) -> LLM:
        """memlane's own LLM client: where each request went (`text.llm_route`), else
        the configured one."""
        if self._llm is not None:
            return self._llm
        from memlane.text.factory import make_llm

        return make_llm(self.settings, clients=self.llm_clients)

    @cached_property
    def summary_llm(self) -> LLM:
        """The client of memlane's cheap calls (summaries, session metadata and queries):
        the dedicated `summary_base_url` when set, else `llm`."""
        if not self.settings.summary_base_url:
            return self.llm
        from memlane.text.factory import SUMMARY_PURPOSE, make_llm

        return make_llm(self.settings, purpose=SUMMARY_PURPOSE, clients=self.llm_clients)

    def summary_model(self, request_model: str | None = None) -> str | None:
        """The model of the cheap calls: `summary_model`, `llm_model`, the request's."""
        settings = self.settings
        return settings.summary_model or settings.llm_model or request_model or None

    def memory_model(self, request_model: str | None = None) -> str | None:
        """The model of fact extraction and reconciliation: `memory_llm_model`,
        `llm_model`, the request's."""
        settings = self.settings
        return settings.memory_llm_model or settings.llm_model or request_model or None

    @cached_property
    def windows(self) -> WindowMemo:
        """The windows upstreams taught, as governance reads them on every turn: the
        store's, remembered for `WINDOW_MEMO_SECONDS` (`governance.budget.WindowMemo`)."""
        from memlane.engine.governance.budget import WindowMemo

        return WindowMemo(self.store)

    @cached_property
    def project_checks(self) -> ProjectChecks:
        """The cache of cited project files recall checks (`engine.memory.stale`)."""
        from memlane.engine.memory.stale import ProjectChecks

        return ProjectChecks()

    @cached_property
    def tenant_salt(self) -> bytes:
        """The salt of tenant ids (`engine.tenancy`), made on first use."""
        from memlane.engine.tenancy import tenant_salt

        return tenant_salt(self.settings, self.store, self.store_kind)

    @property
    def memory_book(self) -> MemoryBook:
        """Long-term memory (files, index, git), opened on first use: one per runtime, so
        its one lock serialises every write."""
        if self._memory_book is None:
            from memlane.engine.memory.book import MemoryBook

            self._memory_book = MemoryBook(self)
        return self._memory_book

    @property
    def opened_memory_book(self) -> MemoryBook | None:
        """The memory book if something opened it (stopping need not open one)."""
        return self._memory_book

    async def settle(self) -> None:
        """Once the writes queued so far are committed and every background job is done,
        those the writes start included: what a stop (or a test) waits for.

        A turn's memory work is queued when its answer's write commits (`pipeline.finish`),
        and a client that resends its history has its answer before that commit: draining
        the background alone missed those turns at a graceful stop. A write stuck past
        `request_wait_seconds` is not waited for again (closing the store bounds it); the
        background's drain is bounded by the callers (`asyncio.timeout`)."""
        while True:
            settled = True
            if "writes" in self.__dict__:
                settled = await self.writes.settled()
                await asyncio.sleep(0)  # the committed writes' callbacks queue their work
            await self.background.drain()
            if not settled or "writes" not in self.__dict__ or not self.writes.pending:
                return

    def close(self) -> None:
        """Commit the writes queued so far, then close the store."""
        if "writes" in self.__dict__:
            self.writes.close(timeout=self.settings.request_wait_seconds)
        self.store.close()
