"""Store URLs: which backend one selects, and shown to people without its password."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"


StoreKind = Literal["sqlite", "postgres"]


def store_kind(url: str | None) -> StoreKind | None:
    """The backend a store URL selects (the one test, used everywhere): unset or
    `sqlite:///PATH` is SQLite, `postgresql://…` / `postgres://…` PostgreSQL; None for
    anything else."""
    if not url or url.startswith(SQLITE_SCHEME):
        return "sqlite"
    if url.startswith(POSTGRES_SCHEMES):
        return "postgres"
    return None


def redact(url: str) -> str:
    """The URL with its password replaced by `***` (unchanged when it has none)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
