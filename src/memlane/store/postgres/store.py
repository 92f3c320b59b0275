"""The PostgreSQL + pgvector backend: one database shared by many proxy replicas.

Same contract as the SQLite file (see `store.base.Store`), built for several
processes on several machines writing at once:

- the schema is migrated at start-up under an advisory lock (`schema`);
- every write to a session's history locks that session's row first
  (`SELECT … FOR NO KEY UPDATE`), so two replicas serving the same session
  append in order and never store a resent turn twice;
- keyword search ranks with BM25 over a GIN-indexed `tsvector` whose lexemes
  are exactly the shared analyser's terms (so `src/app/main.py`, `snake_case`
  and `camelCase` parts match as they do in SQLite) (`keywords`, `search`);
- vectors live in one `vector` column of any dimension, with a partial HNSW
  index (cosine) per dimension, created on first use (`index`).

The roles are written once for every SQL backend (`store.sessions`,
`store.message_log`, `store.facts`, `store.tables`); this package supplies
what differs. Nothing here keeps state another replica could not see: every
answer comes from the database.
"""

from __future__ import annotations

from memlane.store.pages import SqlPages
from memlane.store.postgres.connection import POOL_MAX, PostgresConnection
from memlane.store.postgres.copy import PostgresCopy
from memlane.store.postgres.db import PostgresDb
from memlane.store.postgres.index import PostgresFacts
from memlane.store.postgres.messages import PostgresMessages
from memlane.store.postgres.search import PostgresSearch
from memlane.store.postgres.sessions import PostgresSessions


class PostgresStore(
    PostgresConnection,
    PostgresSessions,
    PostgresMessages,
    PostgresFacts,
    PostgresSearch,
    PostgresCopy,
    SqlPages[PostgresDb],
):
    """A `Store` over a PostgreSQL database with the pgvector extension."""

    def __init__(self, url: str, *, pool_size: int = POOL_MAX) -> None:
        super().__init__(url, pool_size=pool_size)
        self._start_search()
