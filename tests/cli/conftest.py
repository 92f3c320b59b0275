"""What the CLI tests share: a runner over a fresh home, and that home's store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.store.sqlite import SQLiteStore


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "MEMLANE_CONFIG", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "memlane.db")
    yield opened
    opened.close()
