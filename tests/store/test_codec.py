"""The shared encodings: a moment is stored as UTC text whatever zone it came in; stored
JSON is the standard encoder's compact text, whoever writes it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memlane.store.codec import dumps, message_to_json, ts_from_text, ts_to_text
from memlane.types import Message, ToolCall


def test_a_moment_is_written_in_utc_whatever_its_zone() -> None:
    utc = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    east = utc.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert ts_to_text(utc) == ts_to_text(east) == "2026-01-02T03:04:05.000006+00:00"
    assert ts_to_text(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000000+00:00"
    assert ts_from_text(ts_to_text(east)) == utc


def standard(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Point:
    x: int


STORED = [
    message_to_json(
        Message(
            "assistant",
            'Café ✓ 𝄞 — line\nbreak\t"quoted" \\ \u2028 \x00 end',
            tool_calls=(ToolCall("call_1", "read", '{"path": "src/app.py"}'),),
            raw={"role": "assistant", "content": "Café", "n": [1, 2.5, None, True, -0.0]},
        )
    ),
    {"exp": 1e16, "tenth": 0.1, "third": 1 / 3, "whole": 2.0, "negative": -0.5},
    {"big": 10**30, "small": -2.5e-7},  # beyond 64 bits: fallback
    {1: "a key that is not text"},  # fallback
    "\ud800 a lone surrogate",  # fallback
    {"empty": [], "nested": {"deeper": {"deepest": {}}}},
]


@pytest.mark.parametrize("value", STORED)
def test_stored_json_is_the_standard_encoders_compact_text(value: Any) -> None:
    assert dumps(value) == standard(value)


@pytest.mark.parametrize("value", [datetime(2026, 1, 2, tzinfo=UTC), Point(1), object()])
def test_what_the_standard_encoder_refuses_is_still_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        dumps({"value": value})


def test_a_small_floats_exponent_has_no_leading_zero_and_reads_back_the_same() -> None:
    value = {"small": -2.5e-7, "tiny": 1.5e-300}
    assert dumps(value) == '{"small":-2.5e-7,"tiny":1.5e-300}'
    assert json.loads(dumps(value)) == json.loads(standard(value)) == value


def test_a_float_that_is_not_finite_is_written_as_null_which_strict_readers_accept() -> None:
    text = dumps({"cost": math.nan, "ratio": math.inf})
    assert json.loads(text) == {"cost": None, "ratio": None}
