"""Start-up work no request should pay for: the search caches and the embedding model.

The first search of a process loads the store's in-process caches: the keyword
index (~0.7 s at 100k documents in SQLite) and every stored vector (~1–2 s at
100k); the embedding model's first inference is slow too. The proxy starts them
in the background as it starts, so the first request that recalls dropped
history or memory finds them ready. Keywords are always warmed (governance
recalls dropped history by keyword); vectors and the model only with memory on.
"""

from __future__ import annotations

import asyncio
import logging

from memlane.engine.runtime import Runtime
from memlane.store import SearchFilter, StoreError
from memlane.text.embeddings import EmbeddingError

log = logging.getLogger("memlane.proxy")

WARM_QUERY = "memlane"
"""Any text: the query only exists to make the store load its caches."""


async def warm_up(rt: Runtime) -> None:
    """Load the keyword index, then (only when memory is on) the embedder and vectors (the
    secret detectors are loaded before the proxy listens: `proxy.app`)."""
    await asyncio.to_thread(_warm_keywords, rt)
    if rt.settings.memory_enabled and rt.settings.dense_retrieval:
        await asyncio.to_thread(_warm_vectors, rt)


def _warm_keywords(rt: Runtime) -> None:
    try:
        rt.store.keyword_search(WARM_QUERY, SearchFilter(), limit=1)
    except (StoreError, OSError, RuntimeError, ValueError) as exc:
        log.warning("could not warm the keyword index at start-up (the first search will): %s", exc)


def _warm_vectors(rt: Runtime) -> None:
    try:
        embedder = rt.embedder
        vector = embedder.embed([WARM_QUERY])[0]
        rt.store.vector_search(vector, SearchFilter(), model=embedder.model_id, limit=1)
    except (EmbeddingError, StoreError, OSError, RuntimeError, ValueError) as exc:
        log.warning("could not warm the vector cache at start-up (the first search will): %s", exc)
