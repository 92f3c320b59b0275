"""Messages on SQLite: appending many in one write (`store.message_log` holds the rest).

Messages are not search documents (`store.message_log`): nothing searches them by word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memlane.store.arguments import Usage
from memlane.store.base import NewMessage
from memlane.store.codec import dumps, message_to_json, now, ts_to_text
from memlane.store.message_log import (
    History,
    SqlMessageLog,
    appended,
    digest_end,
)
from memlane.store.sessions import usage_counts
from memlane.store.sqlite.db import SQLiteDb
from memlane.store.sqlite.index import next_id
from memlane.types import StoredMessage

_INSERT_MESSAGE = """INSERT INTO messages (id, session_id, position, role, kind, origin, wire,
    content, text, content_hash, token_count, status, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?)"""

_COUNT_MESSAGES = """UPDATE sessions SET message_count = message_count + ?, updated_at = ?,
    client_digest = coalesce(?, client_digest), client_digest_end = coalesce(?, client_digest_end),
    prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?,
    cost_usd = cost_usd + ? WHERE id = ?"""


class SQLiteMessages(SqlMessageLog[SQLiteDb]):
    def _append(
        self,
        db: SQLiteDb,
        history: History,
        items: Sequence[NewMessage],
        hashes: Sequence[str],
        digest: str | None,
        usage: Usage | None = None,
    ) -> list[StoredMessage]:
        # The write lock is held, so the next AUTOINCREMENT ids are ours to hand out:
        # one executemany instead of a statement per message.
        first = next_id(db.conn, "messages") + 1
        ids = list(range(first, first + len(items)))
        created = now()
        stamp = ts_to_text(created)
        rows: list[tuple[Any, ...]] = [
            (
                message_id,
                history.session_id,
                history.next_position + index,
                item.message.role,
                item.message.kind,
                item.message.origin,
                item.message.wire,
                dumps(message_to_json(item.message)),
                item.message.text,
                hashes[index],
                item.token_count,
                stamp,
            )
            for index, (message_id, item) in enumerate(zip(ids, items, strict=True))
        ]
        session_id = history.session_id
        db.conn.executemany(_INSERT_MESSAGE, rows)
        db.conn.execute(
            _COUNT_MESSAGES,
            (
                len(items),
                stamp,
                digest,
                digest_end(history, items, digest),
                *usage_counts(usage),
                session_id,
            ),
        )
        return appended(session_id, history.next_position, ids, items, hashes, created)
