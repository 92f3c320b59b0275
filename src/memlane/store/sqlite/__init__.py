"""The embedded backend: one SQLite file (WAL), with in-process search caches."""

from memlane.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
