"""Choose and open a store backend from settings: the same door for built-ins and the rest."""

from __future__ import annotations

from pathlib import Path

from memlane.config import Settings
from memlane.config.private import NotPrivateError, make_home_private
from memlane.store.base import Store, StoreError
from memlane.store.urls import SQLITE_SCHEME, store_kind


def open_store(settings: Settings) -> Store:
    """The configured store, opened after the home is made private (`config.private`):
    every face that writes the home opens the store first, so each sets the umask here."""
    try:
        make_home_private(settings.home_path)
    except NotPrivateError as exc:
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(
            f"cannot create the data home {settings.home_path}: {exc.strerror}"
        ) from None
    url = settings.store_url
    kind = store_kind(url)
    if kind is None:
        raise StoreError(
            f"unsupported store URL {url!r}: use postgresql://… or sqlite:///PATH, "
            "or leave MEMLANE_STORE_URL unset for the embedded SQLite file"
        )
    if kind == "postgres" and url:
        from memlane.store.postgres import PostgresStore

        return PostgresStore(url)
    from memlane.store.sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(settings), synchronous=settings.sqlite_synchronous)


def sqlite_path(settings: Settings) -> Path:
    """The file a SQLite store is: the one `sqlite:///PATH` names, else the home's
    `memlane.db` (for a store URL of another backend, that URL says where it is)."""
    url = settings.store_url
    return Path(url.removeprefix(SQLITE_SCHEME)) if url else settings.database_path
