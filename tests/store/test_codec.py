"""The shared encodings: a moment is stored as UTC text whatever zone it came in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from memlane.store.codec import ts_from_text, ts_to_text


def test_a_moment_is_written_in_utc_whatever_its_zone() -> None:
    utc = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    east = utc.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert ts_to_text(utc) == ts_to_text(east) == "2026-01-02T03:04:05.000006+00:00"
    assert ts_to_text(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000000+00:00"
    assert ts_from_text(ts_to_text(east)) == utc
