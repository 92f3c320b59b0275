"""Vectors for memory entries: embedded in batches, only where dense retrieval is on.

Kept apart from the memory book: search evaluation and the book's writes both call it,
and it needs nothing of the book but the runtime's store and embedder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from memlane.config import Settings
from memlane.store.base import Store
from memlane.text.embeddings import Embedder, EmbeddingError
from memlane.types import DocKind

log = logging.getLogger("memlane.memory")

EMBED_BATCH = 256
EMBEDDED: tuple[DocKind, ...] = ("fact", "session")
"""What recall searches: memory entries, and the sessions' summaries."""
MODEL_META = "memory.embedding_model"
Progress = Callable[[int, int | None], None]
"""(done, total): total is None while it is not known yet."""


class VectorsRuntime(Protocol):
    """What embedding entries takes of the runtime (`engine.runtime.Runtime`, which opens
    the book that calls it: named here so nothing below the runtime imports it back)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def embedder(self) -> Embedder: ...


def embed_missing(
    rt: VectorsRuntime, progress: Progress | None = None, *, force: bool = False
) -> int:
    """Embed every active entry (and session summary) without a vector of the current model.

    Nothing is embedded while dense retrieval is off (`memory_dense`) unless `force`
    (an evaluation of the dense configuration).

    Content-addressed: the store drops a vector only when its text changes, so
    unchanged text is never re-embedded; a new embedding model drops the old
    vectors and re-embeds everything. A failing embedder is logged: keyword
    search still finds the entries, and the next write retries.
    """
    if not (force or rt.settings.dense_retrieval):
        return 0
    store = rt.store
    try:
        embedder = rt.embedder
        model = embedder.model_id
        if store.get_meta(MODEL_META) != model:
            dropped = store.drop_vectors(except_model=model)
            if dropped:
                log.info("embedding model is now %s: re-embedding %d entries", model, dropped)
            store.set_meta(MODEL_META, model)
        done = 0
        for kind in EMBEDDED:
            while True:
                batch = store.missing_vectors(kind, model=model, limit=EMBED_BATCH)
                if not batch:
                    break
                vectors = embedder.embed([text for _, text in batch])
                store.put_vectors(
                    kind, [(ref, vectors[i]) for i, (ref, _) in enumerate(batch)], model=model
                )
                done += len(batch)
                if progress is not None:
                    progress(done, None)
                if len(batch) < EMBED_BATCH:
                    break
        return done
    except (EmbeddingError, OSError, RuntimeError, ValueError) as exc:
        log.warning("memory entries not embedded (keyword search still works): %s", exc)
        return 0
