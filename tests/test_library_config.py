"""The library reads the same configuration as every command."""

from __future__ import annotations

from pathlib import Path

import pytest

import memlane


def test_governed_history_takes_the_configured_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text('governance_context_windows = { "my-model" = 9000 }\n')
    history = memlane.GovernedHistory(model="my-model")
    assert history.governor().budget.window.tokens == 9_000
    assert history.governor().budget.window.source == "config"
