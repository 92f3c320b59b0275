"""Messages on SQLite: appending many in one write (`store.message_log` holds the rest)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane.store.base import NewMessage
from memlane.store.codec import dumps, message_to_json, now, ts_to_text
from memlane.store.message_log import History, SqlMessageLog, appended
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.index import index_terms, insert_docs, last_ids
from memlane.store.sqlite.tags import doc_tags
from memlane.types import StoredMessage

_INSERT_MESSAGE = """INSERT INTO messages (id, session_id, position, role, kind, origin, wire,
    content, text, content_hash, token_count, status, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?)"""


class SQLiteMessages(SqlMessageLog[SQLiteDb]):
    def _append(
        self, db: SQLiteDb, history: History, items: Sequence[NewMessage], hashes: Sequence[str]
    ) -> list[StoredMessage]:
        # The write lock is held, so the next AUTOINCREMENT ids are ours to hand out:
        # one executemany instead of a statement per message.
        last, last_doc = last_ids(db.conn, "messages", "docs")
        first = last + 1
        ids = list(range(first, first + len(items)))
        created = now()
        stamp = ts_to_text(created)
        tags = doc_tags("message", history.namespace, history.session_id)
        rows: list[tuple[Any, ...]] = []
        docs: list[tuple[Any, ...]] = []  # new messages: their documents cannot exist yet
        for index, (message_id, item) in enumerate(zip(ids, items, strict=True)):
            message = item.message
            rows.append(
                (
                    message_id,
                    history.session_id,
                    history.next_position + index,
                    message.role,
                    message.kind,
                    message.origin,
                    message.wire,
                    dumps(message_to_json(message)),
                    message.text,
                    hashes[index],
                    item.token_count,
                    stamp,
                )
            )
            if message.text:
                docs.append(
                    (
                        "message",
                        str(message_id),
                        history.namespace,
                        history.session_id,
                        None,
                        message.text,
                        index_terms(message.text),
                        stamp,
                        1,
                        tags,
                    )
                )
        session_id = history.session_id
        db.conn.executemany(_INSERT_MESSAGE, rows)
        insert_docs(db.conn, docs, last=last_doc)
        db.conn.execute(
            "UPDATE sessions SET message_count = message_count + ?, updated_at = ? WHERE id = ?",
            (len(items), stamp, session_id),
        )
        return appended(session_id, history.next_position, ids, items, hashes, created)
