"""A date or time as a person (or a script) writes it, read one way by every face.

`memlane memory search --as-of`, `memory supersede --at` and the library's `as_of`,
`valid_from` and `at` all take these forms, through `parse_moment`.
"""

from __future__ import annotations

from datetime import UTC, datetime

MOMENT_FORMS = (
    "YYYY-MM-DD (00:00 UTC that day), an ISO 8601 time (2026-02-15T09:30, UTC unless it "
    "names its offset, as in 2026-02-15T09:30+01:00) or 'now'"
)
"""The forms `parse_moment` reads, as its error lists them."""


def parse_moment(text: str) -> datetime:
    """`text` as an aware UTC datetime: `2026-02-15` (00:00 UTC that day), an ISO 8601 time
    (`2026-02-15T09:30`, UTC unless it names its offset) or `now`. Anything else raises
    `ValueError` naming the forms (`MOMENT_FORMS`)."""
    value = text.strip()
    if value.lower() == "now":
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a date: use {MOMENT_FORMS}") from None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
