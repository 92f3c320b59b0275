"""The embedded store: one SQLite file in WAL mode, analysed terms and vectors per document.

The roles are written once for every SQL backend (`store.sessions`,
`store.message_log`, `store.facts`, `store.tables`); this package supplies the
connections (`connection`), appending (`messages`), forks (`sessions`),
documents (`index`), search (`search`), copying (`copy`) and the
schema (`schema`). Queries run over in-process caches derived from the file
and kept in step with it — BM25 postings (`keyword_index`, with the documents a
filter lets through in `doc_filter`) and vectors (`vector_index`); the WAL is
checkpointed in the background (`checkpoint`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from memlane.store.pages import SqlPages
from memlane.store.sqlite.connection import SQLiteConnection
from memlane.store.sqlite.copy import SQLiteCopy
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.index import SQLiteFacts
from memlane.store.sqlite.messages import SQLiteMessages
from memlane.store.sqlite.search import SQLiteSearch
from memlane.store.sqlite.sessions import SQLiteSessions


class SQLiteStore(
    SQLiteConnection,
    SQLiteSessions,
    SQLiteMessages,
    SQLiteFacts,
    SQLiteSearch,
    SQLiteCopy,
    SqlPages[SQLiteDb],
):
    """`Store` over one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: Path, *, synchronous: Literal["normal", "full"] = "normal") -> None:
        super().__init__(path, synchronous=synchronous)
        self._start_search()

    def _committed(self) -> None:
        super()._committed()
        self._catch_up()
