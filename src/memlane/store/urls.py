"""Store URLs: shown to people without their password, never stored or logged with it."""

from __future__ import annotations

from typing import TypeGuard
from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"


def is_postgres(url: str | None) -> TypeGuard[str]:
    """Whether a store URL selects the PostgreSQL backend (the one test, used everywhere)."""
    return url is not None and url.startswith(POSTGRES_SCHEMES)


def redact(url: str) -> str:
    """The URL with its password replaced by `***` (unchanged when it has none)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
