"""The library's public names are a promise: pinned here, importable, and lazy."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import memlane

PUBLIC = [
    "AsyncMemory",
    "ContextOverflow",
    "GovernedHistory",
    "Memory",
    "MemoryHit",
    "MemoryNotFound",
    "MemoryVersion",
    "Runtime",
    "Settings",
    "WorkingContext",
    "__version__",
    "agovern",
    "govern",
    "load",
    "open_runtime",
    "working_context",
]


def test_all_is_pinned() -> None:
    assert sorted(memlane.__all__) == sorted(PUBLIC)
    assert set(memlane.__all__) - {"__version__"} == set(memlane._EXPORTS)


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "__version__"])
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(memlane, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = memlane.nope  # type: ignore[attr-defined]


def test_import_loads_no_heavy_module() -> None:
    heavy = "('onnxruntime', 'tiktoken', 'fastapi', 'numpy')"
    code = f"import sys, memlane; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_open_runtime_uses_the_configured_home(tmp_path: Path) -> None:
    with memlane.open_runtime(home=tmp_path, embedding_backend="hashing") as rt:
        session = rt.store.ensure_session("library-session")
        assert rt.settings.home == tmp_path
    assert (tmp_path / "memlane.db").exists()
    with memlane.open_runtime(home=tmp_path) as rt:
        found = rt.store.find_session("library-session")
        assert found is not None
        assert found.id == session.id


async def test_open_runtime_is_an_async_context_manager_that_finishes_its_work(
    tmp_path: Path,
) -> None:
    async with memlane.open_runtime(home=tmp_path, embedding_backend="hashing") as rt:
        rt.store.ensure_session("async-session")
        flushed: list[str] = []
        rt.background.spawn(_record(flushed), name="library-test")  # queued, not awaited
    assert flushed == ["done"]  # leaving `async with` drains the background work
    with memlane.open_runtime(home=tmp_path) as rt:
        assert rt.store.find_session("async-session") is not None


async def _record(into: list[str]) -> None:
    await asyncio.sleep(0.05)
    into.append("done")


def test_a_missing_memory_is_an_error_the_library_exports(tmp_path: Path) -> None:
    with memlane.Memory(home=tmp_path) as memory, pytest.raises(memlane.MemoryNotFound):
        memory.forget("no-such-memory")
