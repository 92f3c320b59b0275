"""A runtime over a real SQLite store, the hashing embedder and a scripted LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine.memory.book import MemoryBook
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from tests.support.text import ScriptedLLM


@pytest.fixture
async def rt(
    settings: Settings, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> AsyncIterator[Runtime]:
    runtime = Runtime(settings, sqlite_store, _llm=scripted_llm)
    yield runtime
    await runtime.background.drain()
    await runtime.memory_book.stop_watching()


@pytest.fixture
def book(rt: Runtime) -> MemoryBook:
    return rt.memory_book


def agree(book: MemoryBook) -> dict[str, tuple[str, bool]]:
    """Assert the files and the index hold the same entries; return id -> (text, deleted)."""
    assert book.files is not None
    on_disk = {}
    for path in book.files.scan():
        fact = book.files.read(path).fact
        on_disk[fact.id] = (fact.text, fact.deleted)
    indexed = {f.id: (f.text, f.deleted) for f in book.rt.store.list_facts(include_deleted=True)}
    assert on_disk == indexed
    return on_disk


def home(rt: Runtime) -> Path:
    return rt.settings.memory_path
