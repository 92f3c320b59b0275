"""`parse_moment`: the one reading of a typed date or time, for the CLI and the library."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.types.moments import parse_moment


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-02-15", datetime(2026, 2, 15, tzinfo=UTC)),
        (" 2026-02-15T09:30 ", datetime(2026, 2, 15, 9, 30, tzinfo=UTC)),  # naive: UTC
        ("2026-02-15T09:30Z", datetime(2026, 2, 15, 9, 30, tzinfo=UTC)),
        ("2026-02-15T09:30+01:00", datetime(2026, 2, 15, 8, 30, tzinfo=UTC)),
    ],
)
def test_dates_and_times_are_read_as_utc(text: str, moment: datetime) -> None:
    parsed = parse_moment(text)
    assert parsed == moment
    assert parsed.tzinfo is UTC


def test_now_is_now() -> None:
    assert abs(parse_moment("NOW") - datetime.now(UTC)) < timedelta(seconds=5)


@pytest.mark.parametrize("text", ["", "soon", "2026-13-01", "15/02/2026"])
def test_anything_else_names_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a date: use YYYY-MM-DD .* or 'now'"):
        parse_moment(text)
