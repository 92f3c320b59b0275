"""Facts on SQLite: how a document is written and a turn's words replaced
(`store.facts` holds the rest)."""

from __future__ import annotations

from memlane.store.documents import Doc
from memlane.store.facts import SqlFacts
from memlane.store.sqlite.connection import SQLiteDb
from memlane.store.sqlite.index import put_doc, retext_turn


class SQLiteFacts(SqlFacts[SQLiteDb]):
    def _put_doc(self, db: SQLiteDb, doc: Doc, document: str | None = None) -> None:
        put_doc(db, doc, document)

    def _retext_turn(self, db: SQLiteDb, ref: str, document: str) -> int:
        return retext_turn(db, ref, document)
