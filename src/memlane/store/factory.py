"""Choose and open a store backend from settings: the same door for built-ins and the rest."""

from __future__ import annotations

from memlane.config import Settings
from memlane.store.base import Store
from memlane.store.urls import is_postgres


def open_store(settings: Settings) -> Store:
    url = settings.store_url
    if is_postgres(url):
        from memlane.store.postgres import PostgresStore

        return PostgresStore(url)
    from memlane.store.sqlite import SQLiteStore

    path = settings.database_path
    if url:
        if not url.startswith("sqlite:///"):
            from memlane.store.base import StoreError

            raise StoreError(
                f"unsupported store URL {url!r}: use postgresql://… or sqlite:///PATH, "
                "or leave MEMLANE_STORE_URL unset for the embedded SQLite file"
            )
        from pathlib import Path

        path = Path(url.removeprefix("sqlite:///"))
    return SQLiteStore(path, synchronous=settings.sqlite_synchronous)
