"""A store written before sessions kept their client history's digest, opened by this
memlane: a resent history is matched against the messages stored before, read once,
and the next turn is matched by the digest that read left."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from memlane.store import Store
from memlane.store.codec import message_to_json
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import SQLiteStore
from memlane.store.sqlite import schema as sqlite_schema
from memlane.types import Message
from tests.store.contract.support import assistant, stored_rows_read, user
from tests.store.old_schema import postgres_before, sqlite_before

STAMP = "2026-01-10T00:00:00+00:00"
SESSION = (
    "INSERT INTO sessions (id, key, namespace, metadata, created_at, updated_at, "
    "message_count) VALUES ('s1', 'k', 'k', '{{}}', {t}, {t}, 2)"
)
MESSAGE = (
    "INSERT INTO messages (session_id, position, role, kind, origin, wire, content, "
    "content_hash, created_at) VALUES ('s1', {t}, {t}, 'message', 'client', 'chat', {t}, {t}, {t})"
)
OLD = [Message("user", "q1", wire="chat"), Message("assistant", "a1", wire="chat")]


def rows(placeholder: str) -> list[tuple[str, tuple[object, ...]]]:
    """The statements that store a session of two messages as an older memlane did."""
    made = [(SESSION.format(t=placeholder), (STAMP, STAMP))]
    for position, message in enumerate(OLD):
        content = json.dumps(message_to_json(message))
        values = (position, message.role, content, message.fingerprint(), STAMP)
        made.append((MESSAGE.format(t=placeholder), values))
    return made


def carried_over(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    read = stored_rows_read(monkeypatch)
    resent = [user("q1"), assistant("a1"), user("q2")]
    synced = store.sync_messages("s1", resent)
    assert (synced.matched, [m.position for m in synced.added]) == (2, [2])
    store.append_messages("s1", [assistant("a2")])
    assert store.sync_messages("s1", [*resent, assistant("a2"), user("q3")]).matched == 4
    assert read == [2, 1]  # what was stored before, then the answer stored since
    assert [m.message.text for m in store.list_messages("s1")] == ["q1", "a1", "q2", "a2", "q3"]


def test_sqlite_store_opened_by_this_memlane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "memlane.db"
    raw = sqlite_before(path, sqlite_schema.m015_session_client_digest)
    for sql, values in rows("?"):
        raw.execute(sql, values)
    raw.close()
    store = SQLiteStore(path)
    try:
        carried_over(store, monkeypatch)
    finally:
        store.close()


def test_postgres_store_opened_by_this_memlane(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        plain = postgres_before(conn, "m010_session_client_digest")
        for sql, values in rows("%s"):
            plain.execute(sql, values)
    store = PostgresStore(pg_url)
    try:
        carried_over(store, monkeypatch)
    finally:
        store.close()
