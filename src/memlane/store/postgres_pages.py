"""PostgreSQL queries for the inspector's pages: the same contract as `store.sqlite_pages`.

Each function takes a connection of the store's pool and returns dict rows;
the store turns them into records. Every query is bounded by an index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from memlane.store.sqlite_pages import like_pattern

Conn = psycopg.Connection[dict[str, Any]]
Row = dict[str, Any]


def _session_filter(query: str, namespace: str | None) -> tuple[str, dict[str, Any]]:
    where: list[str] = []
    params: dict[str, Any] = {}
    if namespace is not None:
        where.append("namespace = %(ns)s")
        params["ns"] = namespace
    if query.strip():
        where.append(
            "(coalesce(title, '') ILIKE %(q)s OR key ILIKE %(q)s OR namespace ILIKE %(q)s"
            " OR id ILIKE %(q)s OR metadata::text ILIKE %(q)s)"
        )
        params["q"] = like_pattern(query.strip())
    return (f"WHERE {' AND '.join(where)}" if where else ""), params


def page_sessions(
    conn: Conn, columns: str, *, query: str, namespace: str | None, offset: int, limit: int
) -> tuple[list[Row], int]:
    where, params = _session_filter(query, namespace)
    rows = conn.execute(
        f"SELECT {columns} FROM sessions {where} "
        "ORDER BY updated_at DESC, seq DESC LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "limit": limit, "offset": offset},
    ).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM sessions {where}", params).fetchone()
    return rows, int(total["n"]) if total else 0


def session_namespaces(conn: Conn) -> list[tuple[str, int]]:
    rows = conn.execute(
        "SELECT namespace, count(*) AS n FROM sessions GROUP BY namespace ORDER BY namespace"
    ).fetchall()
    return [(str(r["namespace"]), int(r["n"])) for r in rows]


def page_facts(
    conn: Conn,
    columns: str,
    *,
    scope: str | None,
    include_deleted: bool,
    offset: int,
    limit: int,
) -> tuple[list[Row], int]:
    where = "WHERE (%(scope)s::text IS NULL OR scope = %(scope)s) AND (%(deleted)s OR NOT deleted)"
    params = {"scope": scope, "deleted": include_deleted}
    rows = conn.execute(
        f"SELECT {columns} FROM facts {where} "
        "ORDER BY created_at DESC, seq DESC LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "limit": limit, "offset": offset},
    ).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM facts {where}", params).fetchone()
    return rows, int(total["n"]) if total else 0


def fact_scopes(conn: Conn) -> list[tuple[str, int]]:
    rows = conn.execute(
        "SELECT scope, count(*) AS n FROM facts WHERE NOT deleted GROUP BY scope ORDER BY scope"
    ).fetchall()
    return [(str(r["scope"]), int(r["n"])) for r in rows]


def recent_events(conn: Conn, *, kinds: Sequence[str], after_id: int, limit: int) -> list[Row]:
    return conn.execute(
        "SELECT id, session_id, kind, payload, text, created_at FROM events "
        "WHERE kind = ANY(%(kinds)s) AND id > %(after)s ORDER BY id DESC LIMIT %(limit)s",
        {"kinds": list(kinds), "after": after_id, "limit": limit},
    ).fetchall()


def add_daily_counts(conn: Conn, day: str, counts: Mapping[str, int]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO daily_counts (day, name, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (day, name) DO UPDATE SET value = daily_counts.value + excluded.value",
            [(day, name, int(value)) for name, value in counts.items() if value],
        )


def daily_counts(conn: Conn, since: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    rows = conn.execute(
        "SELECT day, name, value FROM daily_counts WHERE day >= %s ORDER BY day", (since,)
    ).fetchall()
    for row in rows:
        out.setdefault(str(row["day"]), {})[str(row["name"])] = int(row["value"])
    return out
