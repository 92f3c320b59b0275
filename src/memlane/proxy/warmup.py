"""Start-up work no request should pay for: the embedding model and the vector cache.

The first dense search of a process loads every stored vector into the store's
in-process cache (~2 s at 100k memories in SQLite) and the embedding model's
first inference is slow too. The proxy starts both in the background as it
starts, so the first request that recalls memory finds them ready.
"""

from __future__ import annotations

import asyncio
import logging

from memlane.engine.runtime import Runtime
from memlane.store import SearchFilter, StoreError
from memlane.text.embeddings import EmbeddingError

log = logging.getLogger("memlane.proxy")

WARM_QUERY = "memlane"
"""Any text: the query only exists to make the store load its vectors."""


async def warm_up(rt: Runtime) -> None:
    """Load the embedder and the vector cache (only when memory is on)."""
    if not rt.settings.memory_enabled:
        return
    await asyncio.to_thread(_warm_vectors, rt)


def _warm_vectors(rt: Runtime) -> None:
    try:
        embedder = rt.embedder
        vector = embedder.embed([WARM_QUERY])[0]
        rt.store.vector_search(vector, SearchFilter(), model=embedder.model_id, limit=1)
    except (EmbeddingError, StoreError, OSError, RuntimeError, ValueError) as exc:
        log.warning("could not warm the vector cache at start-up (the first search will): %s", exc)
