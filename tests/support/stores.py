"""Shared store fixtures: a fresh SQLite store and matching settings in a temporary home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.store.sqlite import SQLiteStore


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings rooted in `tmp_path`, with the tiny deterministic embedder (no model load).

    Recall's deadline is widened: a test asserting what recall injects must not depend on
    how busy the machine is (the deadline has its own test).
    """
    return Settings(home=tmp_path, embedding_backend="hashing", recall_deadline_ms=30_000)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    """A fresh SQLite store in `tmp_path/memlane.db` (the default database path)."""
    store = SQLiteStore(tmp_path / "memlane.db")
    yield store
    store.close()


def count_commits(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the store's commits (each is one transaction of this process): one item per
    commit is appended to the returned list."""
    made: list[int] = []
    committed = store._committed

    def counted() -> None:
        made.append(1)
        committed()

    monkeypatch.setattr(store, "_committed", counted)
    return made
