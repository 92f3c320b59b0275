"""Persistence: the `Store` protocol and its backends, chosen by `open_store`."""

from memlane.store.base import (
    TABLES,
    NewEvent,
    NewMessage,
    SearchFilter,
    SessionNotFound,
    Store,
    StoreError,
    SyncResult,
    Vector,
)
from memlane.store.factory import open_store

__all__ = [
    "TABLES",
    "NewEvent",
    "NewMessage",
    "SearchFilter",
    "SessionNotFound",
    "Store",
    "StoreError",
    "SyncResult",
    "Vector",
    "open_store",
]
