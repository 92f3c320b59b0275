"""Start-up warm-up: the search caches are loaded in the background before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.proxy.app import create_app
from memlane.proxy.warmup import warm_up
from memlane.store import Store, StoreError
from memlane.store.sqlite import SQLiteStore
from memlane.text import secret_detectors


class RecordingStore:
    """The real store, recording the vector searches made through it."""

    def __init__(self, store: SQLiteStore, *, fail: bool = False) -> None:
        self.store = store
        self.fail = fail
        self.searches: list[str] = []
        self.keyword_searches = 0

    def keyword_search(self, query: str, flt: Any, *, limit: int = 10) -> Any:
        self.keyword_searches += 1
        return self.store.keyword_search(query, flt, limit=limit)

    def vector_search(self, vector: Any, flt: Any, *, model: str, limit: int = 10) -> Any:
        self.searches.append(model)
        if self.fail:
            raise StoreError("the database is gone")
        return self.store.vector_search(vector, flt, model=model, limit=limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def runtime(settings: Settings, store: RecordingStore) -> Runtime:
    return Runtime(settings, cast(Store, store))


async def test_the_proxy_warms_the_vector_cache_as_it_starts(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    recording = RecordingStore(sqlite_store)
    dense = {"memory_enabled": True, "memory_dense": "on"}
    rt = runtime(settings.model_copy(update=dense), recording)
    app = create_app(rt.settings, runtime=rt)
    async with app.router.lifespan_context(app):
        await rt.background.drain()
        assert recording.searches == [rt.embedder.model_id]
        assert recording.keyword_searches == 1


async def test_no_memory_warms_only_the_keyword_index(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    recording = RecordingStore(sqlite_store)
    await warm_up(runtime(settings.model_copy(update={"memory_enabled": False}), recording))
    assert recording.searches == []
    assert recording.keyword_searches == 1


async def test_a_failing_warm_up_is_a_warning(
    settings: Settings, sqlite_store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    recording = RecordingStore(sqlite_store, fail=True)
    dense = {"memory_enabled": True, "memory_dense": "on"}
    await warm_up(runtime(settings.model_copy(update=dense), recording))
    assert recording.searches != []
    assert "could not warm the vector cache" in caplog.text


async def test_without_dense_retrieval_no_model_is_loaded(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    recording = RecordingStore(sqlite_store)
    rt = runtime(settings.model_copy(update={"memory_enabled": True}), recording)
    await warm_up(rt)
    assert recording.searches == []  # no vector search, so no embedder was loaded
    assert recording.keyword_searches == 1
    assert "embedder" not in vars(rt)


def test_the_secret_detectors_are_loaded_before_the_proxy_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session's title is redacted as the store's writer writes its row: a first load
    of the detectors there (0.3–1.4 s) held every write behind it."""
    monkeypatch.setattr(secret_detectors, "_detectors", None)
    settings = Settings(home=tmp_path, upstream_url="http://127.0.0.1:9/v1")
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8100") as client:
        assert secret_detectors.loaded()  # as the lifespan hands over, not later
        assert client.get("/health").status_code == 200


def test_a_start_redacts_the_titles_stored_before_titles_were(tmp_path: Path) -> None:
    key = "sk-proj-" + "a1B2c3D4" * 4
    store = SQLiteStore(tmp_path / "memlane.db")
    old = store.ensure_session("old")
    store.update_session(old.id, title=f"my key is {key}")
    store.close()
    settings = Settings(home=tmp_path, upstream_url="http://127.0.0.1:9/v1")
    app = create_app(settings)
    with TestClient(app, base_url="http://127.0.0.1:8100") as client:
        client.portal.call(app.state.proxy.runtime.background.drain)  # type: ignore[union-attr]
    reopened = SQLiteStore(tmp_path / "memlane.db")
    try:
        stored = reopened.get_session(old.id)
        assert stored is not None
        assert stored.title == "my key is [redacted openai-key]"
    finally:
        reopened.close()
