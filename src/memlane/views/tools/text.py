"""Small text helpers for tool outputs: short ids, one-line snippets, dates."""

from __future__ import annotations

from datetime import datetime

ID_CHARS = 12
"""Ids are shown by their first characters; every tool that takes an id takes a prefix."""
SNIPPET_CHARS = 160


def short_id(ref: str) -> str:
    return ref[:ID_CHARS]


def one_line(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def day(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d")
