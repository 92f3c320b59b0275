"""Whole-store copy for the PostgreSQL backend: rows out (`dump`) and in (`load`).

Row shapes are the ones `store.codec` pins for every backend, so a SQLite dump
loads here and back. Loaded rows keep their ids; the search index is rebuilt
from them and the id sequences moved past them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from memlane.store import codec
from memlane.store.base import StoreError, check_table
from memlane.store.facts import fact_doc, rebuild_turns
from memlane.store.postgres.db import PostgresDb
from memlane.store.postgres.index import (
    ensure_vector_index,
    group_vectors,
    insert_docs,
    insert_vectors,
    put_doc,
    retext_turn,
)
from memlane.store.rows import EVENT_COLUMNS, MESSAGE_COLUMNS, SESSION_COLUMNS, fact_from_row
from memlane.store.sessions import index_summaries
from memlane.store.tables import SqlTables, loaded_event_docs

Conn = psycopg.Connection[dict[str, Any]]
Row = dict[str, Any]
Loader = Callable[[Conn, Sequence[Mapping[str, Any]], set[int]], None]


def insert_rows(
    conn: Conn, table: str, columns: str, rows: Sequence[Mapping[str, Any]], upsert: str = ""
) -> None:
    """Insert `rows` (mappings with every one of `columns`, comma-separated) as they are;
    `upsert`: the key columns whose conflict replaces the stored `value`."""
    values = ", ".join(f"%({name.strip()})s" for name in columns.split(","))
    conflict = f" ON CONFLICT ({upsert}) DO UPDATE SET value = excluded.value" if upsert else ""
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({values}){conflict}", rows)


def load_sessions(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    prepared = [
        {
            "tenant": "",  # a dump made before tenancy
            **r,
            "metadata": Jsonb(dict(r.get("metadata") or {})),
            "created_at": codec.ts_from_text(r["created_at"]),
            "updated_at": codec.ts_from_text(r["updated_at"]),
        }
        for r in rows
    ]
    insert_rows(conn, "sessions", SESSION_COLUMNS, prepared)
    index_summaries(PostgresDb(conn), put_doc, [r["id"] for r in rows])


def load_session_state(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    insert_rows(conn, "session_state", "session_id, name, value", rows)


def load_messages(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    prepared = [
        {**r, "content": Jsonb(r["content"]), "created_at": codec.ts_from_text(r["created_at"])}
        for r in rows
    ]
    insert_rows(conn, "messages", MESSAGE_COLUMNS, prepared)
    advance_sequence(conn, "messages")


def load_events(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    prepared = [
        {
            **r,
            "payload": Jsonb(dict(r.get("payload") or {})),
            "created_at": codec.ts_from_text(r["created_at"]),
        }
        for r in rows
    ]
    insert_rows(conn, "events", EVENT_COLUMNS, prepared)
    insert_docs(conn, loaded_event_docs(PostgresDb(conn), prepared))
    advance_sequence(conn, "events")


def load_facts(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    facts = [fact_from_row(r) for r in rows]
    insert_rows(
        conn,
        "facts",
        ", ".join(codec.FACT_COLUMNS),
        [{**codec.fact_to_row(f), **{t: getattr(f, t) for t in codec.FACT_TIMES}} for f in facts],
    )
    insert_docs(conn, [fact_doc(f) for f in facts])
    # turns are indexed with their neighbours, which the batch itself brought along
    conversations = sorted({f.conversation_id for f in facts})
    rebuild_turns(PostgresDb(conn), retext_turn, conversations=conversations)


def load_vectors(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    """`indexed`: dimensions known to have their HNSW index; grows with the new ones."""
    prepared = [(r["kind"], r["ref"], r["model"], codec.vector_from_text(r["vec"])) for r in rows]
    refs = {(k, ref) for k, ref, _, _ in prepared}
    known = conn.execute(
        "SELECT kind, ref FROM docs JOIN unnest(%s::text[], %s::text[]) AS r(k, f) "
        "ON kind = r.k AND ref = r.f",
        ([k for k, _ in refs], [f for _, f in refs]),
    ).fetchall()
    orphans = refs - {(r["kind"], r["ref"]) for r in known}
    if orphans:
        kind, ref = sorted(orphans)[0]
        raise StoreError(
            f"vector for {kind} {ref} has no document: load the tables in store.TABLES order"
        )
    dims = {int(v.shape[0]) for *_, v in prepared}
    for dim in sorted(dims - indexed):
        ensure_vector_index(conn, dim)
    for (kind, model), group in group_vectors(prepared).items():
        insert_vectors(conn, kind, model, group)
    indexed |= dims


def load_meta(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    insert_rows(conn, "meta", "key, value", rows, upsert="key")


def load_daily_counts(conn: Conn, rows: Sequence[Mapping[str, Any]], indexed: set[int]) -> None:
    insert_rows(conn, "daily_counts", "day, name, value", rows, upsert="day, name")


def advance_sequence(conn: Conn, table: str) -> None:
    """After loading rows with their ids, new rows must get ids above them."""
    conn.execute(
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
        f"greatest((SELECT max(id) FROM {table}), 1))"
    )


LOADERS: dict[str, Loader] = {
    "sessions": load_sessions,
    "session_state": load_session_state,
    "messages": load_messages,
    "events": load_events,
    "facts": load_facts,
    "vectors": load_vectors,
    "meta": load_meta,
    "daily_counts": load_daily_counts,
}

DUMP_SQL = {
    "sessions": f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY seq",
    "session_state": "SELECT session_id, name, value FROM session_state ORDER BY session_id, name",
    "messages": f"SELECT {MESSAGE_COLUMNS} FROM messages ORDER BY id",
    "events": f"SELECT {EVENT_COLUMNS} FROM events ORDER BY id",
    "facts": f"SELECT {', '.join(codec.FACT_COLUMNS)} FROM facts ORDER BY seq",
    "vectors": "SELECT kind, ref, model, dim, embedding::real[] AS vec FROM vectors "
    "ORDER BY kind, ref, model",
    "meta": "SELECT key, value FROM meta ORDER BY key",
    "daily_counts": "SELECT day, name, value FROM daily_counts ORDER BY day, name",
}


def dump_row(table: str, row: Row) -> dict[str, Any]:
    out = dict(row)
    for name in codec.FACT_TIMES:
        if isinstance(out.get(name), datetime):
            out[name] = codec.ts_to_text(out[name])
    if table == "vectors":
        out["vec"] = codec.vector_to_text(np.asarray(out["vec"], dtype=np.float32))
    if table == "sessions":
        out["cost_usd"] = float(out["cost_usd"])
    return out


class PostgresCopy(SqlTables[PostgresDb]):
    """The tables role (`store.tables`: meta, counts) with this backend's dump and load."""

    _indexed_dims: set[int]

    def dump(self, table: str) -> Iterator[dict[str, Any]]:
        check_table(table)
        # a transaction, though nothing is written: a server-side cursor lives in one
        with self._writing() as db, db.conn.cursor(name=f"dump_{table}") as cur:
            cur.itersize = 1000
            cur.execute(DUMP_SQL[table])
            for row in cur:
                yield dump_row(table, row)

    def load(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        check_table(table)
        if not rows:
            return
        with self._writing() as db:
            indexed = set(self._indexed_dims)
            LOADERS[table](db.conn, rows, indexed)
        self._indexed_dims |= indexed
