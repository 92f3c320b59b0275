"""Relative dates made absolute against the date a message was written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.engine.memory.dates import absolute_dates

TUESDAY = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user went hiking yesterday", "The user went hiking on 2026-03-09"),
        ("Yesterday the user moved to Lisbon", "On 2026-03-09 the user moved to Lisbon"),
        (
            "The user has a dentist appointment tomorrow",
            "The user has a dentist appointment on 2026-03-11",
        ),
        ("The user was ill the day before yesterday", "The user was ill on 2026-03-08"),
        ("The user flies the day after tomorrow", "The user flies on 2026-03-12"),
        ("The user starts at ACME next Friday", "The user starts at ACME on 2026-03-13"),
        ("The user ran a race last Tuesday", "The user ran a race on 2026-03-03"),
        ("The user ran a race last Monday", "The user ran a race on 2026-03-09"),
        ("The user plays chess this Sunday", "The user plays chess on 2026-03-15"),
        ("The user met Anne 3 days ago", "The user met Anne on 2026-03-07"),
        ("The user adopted a cat two weeks ago", "The user adopted a cat on 2026-02-24"),
        ("The user quit smoking a year ago", "The user quit smoking on 2025-03-10"),
        ("The user moved here six months ago", "The user moved here on 2025-09-10"),
        ("The user travels in 5 days", "The user travels on 2026-03-15"),
        ("The user has lived in Lisbon since last year", "The user has lived in Lisbon since 2025"),
        ("The user visited Rome last month", "The user visited Rome in February 2026"),
        ("The user plans to visit next week", "The user plans to visit in the week of 2026-03-16"),
        ("The user graduates next year", "The user graduates in 2027"),
        ("The user has been sick since yesterday", "The user has been sick since 2026-03-09"),
    ],
)
def test_relative_dates_become_absolute(text: str, expected: str) -> None:
    assert absolute_dates(text, TUESDAY) == expected


@pytest.mark.parametrize(
    "text",
    [
        "On 2026-03-09 the user went hiking",
        "The user liked yesterday's talk",  # a possessive stays as written
        "The user's last name is Monday",
        "The user lives in Lisbon",
        "The user read a book about today's politics",
    ],
)
def test_absolute_or_unrelated_text_is_left_alone(text: str) -> None:
    assert absolute_dates(text, TUESDAY) == text


def test_month_arithmetic_clamps_to_the_month_end() -> None:
    march_31 = datetime(2026, 3, 31, tzinfo=UTC)
    assert absolute_dates("one month ago", march_31) == "on 2026-02-28"
    assert absolute_dates("last month", datetime(2026, 1, 5, tzinfo=UTC)) == "in December 2025"
