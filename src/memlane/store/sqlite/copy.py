"""Whole-store copy for the SQLite backend: rows out (`dump`) and in (`load`).

Row shapes are the ones `store.codec` pins for every backend, so a PostgreSQL
dump loads here and back. Loaded rows keep their ids; the search documents of
events, facts and session summaries are built again from them, and vectors are
attached to the documents they belong to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memlane.store.base import StoreError, check_table
from memlane.store.codec import (
    dumps,
    vector_from_bytes,
    vector_from_text,
    vector_to_bytes,
    vector_to_text,
)
from memlane.store.facts import loaded_documents
from memlane.store.rows import Row, decoded, fact_from_row
from memlane.store.sessions import index_summaries
from memlane.store.sql import marks
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.index import doc_row, insert_docs, put_doc, retext_turn
from memlane.store.tables import SqlTables, loaded_event_docs

_JSON_COLUMNS = {"sessions": "metadata", "messages": "content", "events": "payload"}
_ORDER = {"session_state": "session_id, name", "meta": "key", "daily_counts": "day, name"}
_VECTORS = """SELECT d.kind, d.ref, v.model, v.dim, v.vec FROM vectors v
    JOIN docs d ON d.rowid = v.doc_id ORDER BY v.id"""


class SQLiteCopy(SqlTables[SQLiteDb]):
    """The tables role (`store.tables`: meta, counts) with this backend's dump and load."""

    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        check_table(table)
        with self._reading() as db:
            if table == "vectors":
                rows = [_dump_vector(r) for r in db.all(_VECTORS)]
            else:
                order = _ORDER.get(table, "rowid")
                rows = [
                    _dump_row(table, dict(r))
                    for r in db.all(f"SELECT * FROM {table} ORDER BY {order}")
                ]
        yield from rows

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        check_table(table)
        with self._writing() as db:
            if table == "vectors":
                for row in rows:
                    _load_vector(db, row)
                return
            _insert(db, table, rows)
            if table == "sessions":
                index_summaries(db, put_doc, [row["id"] for row in rows])
            elif table == "events":
                for doc in loaded_event_docs(db, rows):
                    put_doc(db, doc)
            elif table == "facts":
                # each document built once, a turn with its neighbours, inserted together
                facts = [fact_from_row(row) for row in rows]
                insert_docs(
                    db.conn, [doc_row(d, w) for d, w in loaded_documents(db, facts, retext_turn)]
                )


def _dump_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    column = _JSON_COLUMNS.get(table)
    if column is not None:
        row[column] = decoded(row[column])
    if table == "facts":
        row["deleted"] = bool(row["deleted"])
    elif table == "sessions":
        # what the writer keeps of the session's messages: taken anew, not copied
        del row["client_digest"], row["client_digest_end"]
    return row


def _dump_vector(row: Row) -> dict[str, Any]:
    return {
        "kind": row["kind"],
        "ref": row["ref"],
        "model": row["model"],
        "dim": row["dim"],
        "vec": vector_to_text(vector_from_bytes(row["vec"])),
    }


def _insert(db: SQLiteDb, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert dumped rows, one statement per set of columns (a dump's rows share theirs)."""
    column = _JSON_COLUMNS.get(table)
    by_names: dict[tuple[str, ...], list[list[Any]]] = {}
    for row in rows:
        values = dict(row)
        if column is not None:
            values[column] = dumps(values[column])
        if table == "facts":
            values["deleted"] = int(bool(values["deleted"]))
        by_names.setdefault(tuple(values), []).append(list(values.values()))
    for names, batch in by_names.items():
        db.conn.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks(names)})", batch
        )


def _load_vector(db: SQLiteDb, row: Mapping[str, Any]) -> None:
    doc = db.one("SELECT rowid FROM docs WHERE kind = ? AND ref = ?", row["kind"], row["ref"])
    if doc is None:
        raise StoreError(
            f"vector for {row['kind']} {row['ref']} has no document: load the tables in "
            "store.TABLES order"
        )
    vector = vector_from_text(row["vec"])
    db.run(
        "INSERT OR REPLACE INTO vectors (doc_id, model, dim, vec) VALUES (?, ?, ?, ?)",
        doc["rowid"],
        row["model"],
        int(vector.shape[0]),
        vector_to_bytes(vector),
    )
