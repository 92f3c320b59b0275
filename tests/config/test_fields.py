"""Settings are declared as `name: Type = default`, described by their docstring, with
ranges as named types (`config/fields.py`): the description and the range both hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.config import ConfigError, Settings, load_settings
from memlane.docs import config_table


def test_every_setting_is_described_by_its_docstring() -> None:
    undescribed = [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    assert undescribed == []
    # a docstring wrapped over lines is one line in its README row
    row = next(r for r in config_table().splitlines() if "MEMLANE_GOVERNANCE_CONTEXT_WINDOWS" in r)
    assert "a key matches the model name or its prefix" in row


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("governance_compact_threshold", "1.5"),  # Fraction: at most 1
        ("memory_mmr_lambda", "-0.1"),  # Fraction: at least 0
        ("governance_tail_share", "1.0"),  # ProperFraction: below 1
        ("governance_compact_target", "0"),  # ProperFraction: above 0
        ("governance_safety_margin", "-1"),  # NonNegativeInt
        ("max_body_bytes", "0"),  # PositiveInt
        ("llm_timeout", "0"),  # PositiveFloat
        ("port", "65536"),  # a range of its own
    ],
)
def test_a_value_outside_its_range_names_the_setting(tmp_path: Path, name: str, value: str) -> None:
    env = {"MEMLANE_HOME": str(tmp_path), f"MEMLANE_{name.upper()}": value}
    with pytest.raises(ConfigError, match=f"'{name}'"):
        load_settings(environ=env)


def test_the_ends_of_a_fraction_are_allowed(tmp_path: Path) -> None:
    env = {
        "MEMLANE_HOME": str(tmp_path),
        "MEMLANE_MEMORY_MMR_LAMBDA": "0",
        "MEMLANE_MEMORY_RECENCY_WEIGHT": "1",
        "MEMLANE_GOVERNANCE_COMPACT_THRESHOLD": "0",
    }
    settings = load_settings(environ=env).settings
    assert (settings.memory_mmr_lambda, settings.memory_recency_weight) == (0.0, 1.0)
