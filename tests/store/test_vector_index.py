"""The SQLite vector search's in-process cache: loads in chunks, rebuilds without re-reading."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memlane.store import SearchFilter
from memlane.store.sqlite import SQLiteStore, vector_index
from memlane.types import Fact

STAMP = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 8


def unit_vectors(count: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def best(store: SQLiteStore, vector: np.ndarray, **flt: object) -> tuple[str, float]:
    hits = store.vector_search(vector, SearchFilter(**flt), model="m", limit=1)  # type: ignore[arg-type]
    return hits[0].ref, round(hits[0].score, 5)


def test_every_vector_is_found_again_after_chunked_loads_and_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_index, "LOAD_CHUNK", 7)  # many chunks from a small store
    db = tmp_path / "memlane.db"
    writer = SQLiteStore(db)
    vectors = unit_vectors(60)
    for i in range(60):
        writer.put_fact(Fact(f"f{i}", f"scope{i % 4}", "c", "memory", f"text {i}", STAMP, STAMP))
    writer.put_vectors("fact", [(f"f{i}", vectors[i]) for i in range(60)], model="m")
    reader = SQLiteStore(db)
    assert [best(reader, vectors[i]) for i in range(60)] == [(f"f{i}", 1.0) for i in range(60)]
    # a removed vector and a document moved to another scope make every reader rebuild
    writer.purge_fact("f0")
    moved = writer.get_fact("f1")
    assert moved is not None
    writer.put_fact(Fact("f1", "scope9", "c", "memory", moved.text, STAMP, STAMP))
    writer.put_vectors("fact", [("f1", vectors[1])], model="m")
    assert best(reader, vectors[0])[0] != "f0"
    assert best(reader, vectors[1], scopes=("scope9",)) == ("f1", 1.0)
    for i in range(2, 60):
        assert best(reader, vectors[i]) == (f"f{i}", 1.0)
        assert best(reader, vectors[i], scopes=(f"scope{i % 4}",)) == (f"f{i}", 1.0)
    reader.close()
    writer.close()
