"""SQLite queries for the inspector's pages: paged lists, filters, the activity feed, counters.

Each function takes the store's reader (`SQLiteStore._read`) or a write
connection and returns raw rows; the store turns them into records. Every
query is bounded by an index (sessions by `updated_at`, facts by
`(scope, created_at)` or rowid, events by `(kind, id)`, counters by day), so a
page costs the same at 2,000 sessions and 100k memories as at ten.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Read = Callable[[str, Sequence[Any]], list[sqlite3.Row]]


def like_pattern(query: str) -> str:
    """`%query%` with LIKE's wildcards in the query taken literally (escape `\\`)."""
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def session_filter(query: str, namespace: str | None) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if namespace is not None:
        where.append("namespace = ?")
        params.append(namespace)
    if query.strip():
        # title, key, namespace, id and the index metadata (name, description, summary, tags)
        where.append(
            "(coalesce(title, '') LIKE ? ESCAPE '\\' OR key LIKE ? ESCAPE '\\'"
            " OR namespace LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\'"
            " OR metadata LIKE ? ESCAPE '\\')"
        )
        params.extend([like_pattern(query.strip())] * 5)
    return (f"WHERE {' AND '.join(where)}" if where else ""), params


def page_sessions(
    read: Read, columns: str, *, query: str, namespace: str | None, offset: int, limit: int
) -> tuple[list[sqlite3.Row], int]:
    where, params = session_filter(query, namespace)
    rows = read(
        f"""SELECT {columns} FROM sessions {where}
            ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?""",
        [*params, limit, offset],
    )
    total = read(f"SELECT count(*) AS n FROM sessions {where}", params)[0]["n"]
    return rows, int(total)


def session_namespaces(read: Read) -> list[tuple[str, int]]:
    rows = read(
        "SELECT namespace, count(*) AS n FROM sessions GROUP BY namespace ORDER BY namespace", []
    )
    return [(str(r["namespace"]), int(r["n"])) for r in rows]


def page_facts(
    read: Read,
    columns: str,
    *,
    scope: str | None,
    include_deleted: bool,
    offset: int,
    limit: int,
) -> tuple[list[sqlite3.Row], int]:
    """Newest first: by `(scope, created_at)` within a scope, by insertion order across all."""
    where: list[str] = []
    params: list[Any] = []
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if not include_deleted:
        where.append("deleted = 0")
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    if scope is not None:
        order, listing = "created_at DESC, rowid DESC", clause
    else:  # walk rowids backwards; `+deleted` keeps the planner off the (deleted, scope) index
        order, listing = "rowid DESC", clause.replace("deleted = 0", "+deleted = 0")
    rows = read(
        f"SELECT {columns} FROM facts {listing} ORDER BY {order} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    total = read(f"SELECT count(*) AS n FROM facts {clause}", params)[0]["n"]  # index only
    return rows, int(total)


def fact_scopes(read: Read) -> list[tuple[str, int]]:
    rows = read(
        "SELECT scope, count(*) AS n FROM facts WHERE deleted = 0 GROUP BY scope ORDER BY scope",
        [],
    )
    return [(str(r["scope"]), int(r["n"])) for r in rows]


def recent_events(
    read: Read, columns: str, *, kinds: Sequence[str], after_id: int, limit: int
) -> list[sqlite3.Row]:
    marks = ", ".join("?" for _ in kinds)
    return read(
        f"""SELECT {columns} FROM events WHERE kind IN ({marks}) AND id > ?
            ORDER BY id DESC LIMIT ?""",
        [*kinds, after_id, limit],
    )


def add_daily_counts(conn: sqlite3.Connection, day: str, counts: Mapping[str, int]) -> None:
    conn.executemany(
        """INSERT INTO daily_counts (day, name, value) VALUES (?, ?, ?)
           ON CONFLICT (day, name) DO UPDATE SET value = value + excluded.value""",
        [(day, name, int(value)) for name, value in counts.items() if value],
    )


def daily_counts(read: Read, since: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in read(
        "SELECT day, name, value FROM daily_counts WHERE day >= ? ORDER BY day", [since]
    ):
        out.setdefault(str(row["day"]), {})[str(row["name"])] = int(row["value"])
    return out
