"""Facts on PostgreSQL: how a document is written and a turn's words replaced
(`store.facts` holds the rest)."""

from __future__ import annotations

from memlane.store.documents import Doc
from memlane.store.facts import SqlFacts
from memlane.store.postgres.connection import PostgresDb
from memlane.store.postgres.index import put_doc, retext_turn


class PostgresFacts(SqlFacts[PostgresDb]):
    def _put_doc(self, db: PostgresDb, doc: Doc, document: str | None = None) -> None:
        put_doc(db, doc, document)

    def _retext_turn(self, db: PostgresDb, ref: str, document: str) -> int:
        return retext_turn(db, ref, document)
