"""`search` over a real SQLite store: methods, identifiers, scopes, threshold, recency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.config import Settings
from memlane.engine.memory.vectors import embed_missing
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact

NOW = datetime(2025, 6, 1, tzinfo=UTC)
TEXTS = {
    "a": "The deploy script lives in src/tools/deploy_all.py",
    "b": "Error E4021 means the cache volume is full",
    "c": "The user prefers camelCase names like loadUserProfile",
    "d": "The user walks the dog every morning",
}


def runtime(settings: Settings, store: SQLiteStore, **changes: object) -> Runtime:
    for ref, text in TEXTS.items():
        when = NOW - timedelta(days=400 if ref == "d" else 1)
        store.put_fact(Fact(ref, "ns:r", "c1", "memory", text, when, when))
    store.put_fact(Fact("e", "ns:other", "c2", "memory", "Error E4021 elsewhere", NOW, NOW))
    rt = Runtime(settings.model_copy(update={"memory_dense": "on", **changes}), store)
    embed_missing(rt)
    return rt


async def test_identifiers_are_found_exactly(settings: Settings, sqlite_store: SQLiteStore) -> None:
    rt = runtime(settings, sqlite_store)
    for query, ref in (("deploy_all.py", "a"), ("E4021", "b"), ("loadUserProfile", "c")):
        found = await search(rt, query, scopes=["ns:r"], now=NOW)
        assert found[0].ref == ref, query
        assert all(c.scope == "ns:r" for c in found)


async def test_methods_and_empty_inputs(settings: Settings, sqlite_store: SQLiteStore) -> None:
    rt = runtime(settings, sqlite_store)
    bm25 = await search(rt, "cache volume full", scopes=["ns:r"], method="bm25", now=NOW)
    assert [c.ref for c in bm25] == ["b"]  # keyword search only returns matching documents
    dense = await search(rt, "cache volume full", scopes=["ns:r"], method="dense", now=NOW)
    assert dense[0].ref == "b"
    assert len(dense) == 4  # dense search ranks everything in scope
    assert await search(rt, "   ", scopes=["ns:r"]) == []
    assert await search(rt, "E4021", scopes=[]) == []
    everywhere = await search(rt, "E4021", scopes=None, top_k=10)
    assert {"b", "e"} <= {c.ref for c in everywhere}


async def test_threshold_prunes_weak_matches(settings: Settings, sqlite_store: SQLiteStore) -> None:
    rt = runtime(settings, sqlite_store, memory_score_threshold=0.9)
    found = await search(rt, "E4021 cache volume", scopes=["ns:r"], now=NOW)
    assert [c.ref for c in found] == ["b"]
    assert found[0].relevance >= 0.9


async def test_recency_weight_lifts_recent_memories(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    neutral = runtime(settings, sqlite_store, memory_recency_weight=0.0, memory_mmr_lambda=1.0)
    query = "the user every morning deploy"
    plain = [c.ref for c in await search(neutral, query, scopes=["ns:r"], now=NOW)]
    recent = Runtime(
        neutral.settings.model_copy(update={"memory_recency_weight": 0.9}), sqlite_store
    )
    lifted = [c.ref for c in await search(recent, query, scopes=["ns:r"], now=NOW)]
    assert plain.index("d") < lifted.index("d")  # the 400-day-old memory sinks


async def test_dense_retrieval_is_off_by_default_with_the_packaged_model(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store, memory_dense="auto")
    assert not rt.settings.dense_retrieval  # auto: only an embeddings endpoint turns it on
    found = await search(rt, "cache volume full", scopes=["ns:r"], now=NOW)
    assert [c.ref for c in found] == ["b"]  # keyword hits only: nothing dense ranks
    assert rt.settings.model_copy(update={"embedding_backend": "openai"}).dense_retrieval
