"""Relative dates made absolute: a fact read months later must still say when.

"I went hiking yesterday", read in a year, is wrong; "On 2026-03-09 the user
went hiking" is not. Extraction asks the model to write absolute dates against
the message's date (`extract.FACT_PROMPT`), and `absolute_dates` then rewrites
any relative expression the model left, deterministically, against the same
date (the message's UTC date):

- yesterday / today / tonight / tomorrow, the day before yesterday, the day
  after tomorrow: that day ("on 2026-03-09");
- last / this / next <weekday>: the nearest such day strictly before the
  message's day, in its Monday-to-Sunday week, or strictly after it;
- N days / weeks / months / years ago, in N days / weeks: that day;
- last / this / next week, month, year: "the week of 2026-03-02" (its Monday),
  "March 2026", "2025".

After a preposition ("since yesterday") the date stands alone ("since
2026-03-09"); elsewhere it gets its own ("on 2026-03-09", "in 2025"). Anything
else is left as the model wrote it.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
PREPOSITIONS = frozenset(
    "on since until till from by before after of to through around about as".split()
)

_COUNT = r"(?P<n>\d{1,3}|" + "|".join(NUMBERS) + r")"
_DAY_WORDS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
}
_WHICH = r"(?P<which>last|this|next)"
_NOT_POSSESSIVE = r"(?!['’]s)"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("day", re.compile(r"\b(?P<w>" + "|".join(_DAY_WORDS) + r")\b" + _NOT_POSSESSIVE, re.I)),
    ("weekday", re.compile(r"\b" + _WHICH + r" (?P<w>" + "|".join(WEEKDAYS) + r")\b", re.I)),
    ("ago", re.compile(r"\b" + _COUNT + r" (?P<unit>day|week|month|year)s? ago\b", re.I)),
    ("ahead", re.compile(r"\bin " + _COUNT + r" (?P<unit>day|week)s?\b", re.I)),
    (
        "period",
        re.compile(r"\b" + _WHICH + r" (?P<unit>week|month|year)\b" + _NOT_POSSESSIVE, re.I),
    ),
]


def absolute_dates(text: str, said_at: datetime) -> str:
    """`text` with its relative dates rewritten against the date of `said_at`."""
    today = said_at.date()
    for kind, pattern in _PATTERNS:
        text = pattern.sub(_replacer(kind, today), text)
    return text


def _replacer(kind: str, today: date) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        words = {k: v.lower() for k, v in match.groupdict().items() if v is not None}
        if kind == "day":
            return _phrase(match, _iso(today + timedelta(days=_DAY_WORDS[words["w"]])), "on")
        if kind == "weekday":
            return _phrase(match, _iso(_weekday(today, words["which"], words["w"])), "on")
        if kind in ("ago", "ahead"):
            count = int(words["n"]) if words["n"].isdigit() else NUMBERS[words["n"]]
            moved = _shift(today, words["unit"], -count if kind == "ago" else count)
            return _phrase(match, _iso(moved), "on")
        step = {"last": -1, "this": 0, "next": 1}[words["which"]]
        unit = words["unit"]
        if unit == "week":
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            return _phrase(match, f"the week of {_iso(monday)}", "in")
        if unit == "month":
            first = _shift(today.replace(day=1), "month", step)
            return _phrase(match, f"{calendar.month_name[first.month]} {first.year}", "in")
        return _phrase(match, str(today.year + step), "in")

    return replace


def _phrase(match: re.Match[str], value: str, preposition: str) -> str:
    """The date, with its own preposition unless one stands just before it."""
    before = match.string[: match.start()].split()
    preceded = bool(before) and before[-1].lower().strip("(\"'") in PREPOSITIONS
    out = value if preceded else f"{preposition} {value}"
    if match.group(0)[0].isupper() and not preceded:
        out = out[0].upper() + out[1:]
    return out


def _weekday(today: date, which: str, name: str) -> date:
    target = WEEKDAYS.index(name)
    if which == "last":
        return today - timedelta(days=(today.weekday() - target - 1) % 7 + 1)
    if which == "next":
        return today + timedelta(days=(target - today.weekday() - 1) % 7 + 1)
    return today + timedelta(days=target - today.weekday())


def _shift(day: date, unit: str, count: int) -> date:
    if unit == "day":
        return day + timedelta(days=count)
    if unit == "week":
        return day + timedelta(weeks=count)
    months = day.year * 12 + day.month - 1 + (count if unit == "month" else 12 * count)
    year, month = divmod(months, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def _iso(day: date) -> str:
    return day.isoformat()
