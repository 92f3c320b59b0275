"""Persistence: the `Store` protocol and its backends, chosen by `open_store`."""

from memlane.store.arguments import Usage
from memlane.store.base import (
    TABLES,
    FactStore,
    MessageLog,
    MetaStore,
    NewEvent,
    NewMessage,
    SearchFilter,
    SearchIndex,
    SessionNotFound,
    SessionStore,
    Store,
    StoreCopy,
    StoreError,
    SyncResult,
    Vector,
)
from memlane.store.counting import CountWhenStored
from memlane.store.factory import open_store

__all__ = [
    "TABLES",
    "CountWhenStored",
    "FactStore",
    "MessageLog",
    "MetaStore",
    "NewEvent",
    "NewMessage",
    "SearchFilter",
    "SearchIndex",
    "SessionNotFound",
    "SessionStore",
    "Store",
    "StoreCopy",
    "StoreError",
    "SyncResult",
    "Usage",
    "Vector",
    "open_store",
]
