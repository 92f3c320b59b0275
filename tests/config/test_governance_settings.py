"""Governance knobs: text from the environment, and the documented knob table kept true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlane.config import ConfigError, Settings, load_settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "governance.md"


def test_every_knob_is_in_the_documented_table_with_its_default() -> None:
    section = PAGE.read_text(encoding="utf-8").split("## Settings", 1)[1]
    rows = dict(re.findall(r"^\| `(GOVERNANCE_[A-Z_]+)` \| ([^|]+) \|", section, re.M))
    knobs = {n for n in Settings.model_fields if n.startswith("governance_")}
    assert {f"GOVERNANCE_{n[len('governance_') :].upper()}" for n in knobs} == set(rows)
    for name in knobs:
        default = Settings.model_fields[name].default
        shown = rows[f"GOVERNANCE_{name[len('governance_') :].upper()}"].strip()
        expected = "—" if default in ({}, None) else f"`{str(default).lower()}`"
        assert shown == expected, name


def test_windows_come_from_the_environment_as_text(tmp_path: Path) -> None:
    env = {
        "MEMLANE_HOME": str(tmp_path),
        "MEMLANE_GOVERNANCE_CONTEXT_WINDOWS": "llama3=8192, qwen=32768",
    }
    settings = load_settings(environ=env).settings
    assert settings.governance_context_windows == {"llama3": 8192, "qwen": 32768}
    as_json = {**env, "MEMLANE_GOVERNANCE_CONTEXT_WINDOWS": '{"m": 4096}'}
    assert load_settings(environ=as_json).settings.governance_context_windows == {"m": 4096}


@pytest.mark.parametrize("value", ["llama3", "llama3=abc", "tiny=100"])
def test_bad_windows_name_the_setting(tmp_path: Path, value: str) -> None:
    env = {"MEMLANE_HOME": str(tmp_path), "MEMLANE_GOVERNANCE_CONTEXT_WINDOWS": value}
    with pytest.raises(ConfigError, match="governance_context_windows"):
        load_settings(environ=env)
