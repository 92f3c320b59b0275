"""The `InspectorReads` role, written once for every SQL backend: the web inspector's reads.

Paged and searched sessions, paged memories, live entries per scope, events
of some kinds across every session (the activity feed), and counters per day.
Every query is bounded by an index — sessions by `updated_at`, facts by
`(scope, created_at)`, `created_at` or `(deleted, scope)`, events by
`(kind, id)`, counters by day — so a page costs the same at 2,000 sessions and
100k memories as at ten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Unpack

from memlane.store.arguments import PAGE_SIZE, FactPage, Paging, SessionPage
from memlane.store.codec import FACT_COLUMNS
from memlane.store.rows import EVENT_COLUMNS, SESSION_COLUMNS, event_from_row, session_from_row
from memlane.store.rows import fact_from_row as fact_row
from memlane.store.sql import D, Db, SqlStore, Where, among, page
from memlane.types import Event, Fact, Session

_FACTS = ", ".join(FACT_COLUMNS)


def like_pattern(query: str) -> str:
    """`%query%`, lower case, with LIKE's wildcards in the query taken literally."""
    escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def bounds(which: Paging) -> tuple[int, int]:
    """(limit, offset) of a paged read, their defaults for those not given."""
    return which.get("limit", PAGE_SIZE), which.get("offset", 0)


SESSION_TEXT_COLUMNS = ("coalesce(title, '')", "key", "namespace", "id")
SESSION_TEXT_FIELDS = ("name", "description", "summary", "tags")
"""What a session search looks in: these columns, and these fields of the index metadata
(their values, never the JSON's keys or punctuation)."""


def session_filter(db: Db, query: str, namespace: str | None) -> Where:
    """One namespace, and/or a substring (any case) of the title, key, namespace, id or a
    value of the index metadata (name, description, summary, a tag)."""
    where = Where().equal("namespace", namespace)
    if query.strip():
        like = "LIKE ? ESCAPE '\\'"
        tests = [f"lower({column}) {like}" for column in SESSION_TEXT_COLUMNS]
        tests += [
            f"EXISTS (SELECT 1 FROM {db.json_values('metadata', field)} AS found "
            f"WHERE lower(found.value) {like})"
            for field in SESSION_TEXT_FIELDS
        ]
        where.add("(" + " OR ".join(tests) + ")", *[like_pattern(query.strip())] * len(tests))
    return where


def counted_by(db: Db, table: str, column: str, where: Where) -> list[tuple[str, int]]:
    """(value, how many rows have it) for each value of `column` among the rows of `table`
    that `where` lets through, by value."""
    rows = db.all(
        f"SELECT {column}, count(*) AS n FROM {table} {where}GROUP BY {column} ORDER BY {column}",
        *where.params,
    )
    return [(str(r[column]), int(r["n"])) for r in rows]


class SqlPages(SqlStore[D]):
    def page_sessions(self, **which: Unpack[SessionPage]) -> tuple[list[Session], int]:
        limit, offset = bounds(which)
        with self._reading() as db:
            where = session_filter(db, which.get("query", ""), which.get("namespace"))
            rows, total = page(
                db,
                SESSION_COLUMNS,
                "sessions",
                where,
                f"updated_at DESC, {db.seq} DESC",
                limit=limit,
                offset=offset,
            )
        return [session_from_row(r) for r in rows], total

    def session_namespaces(self) -> list[tuple[str, int]]:
        with self._reading() as db:
            return counted_by(db, "sessions", "namespace", Where())

    def page_facts(self, **which: Unpack[FactPage]) -> tuple[list[Fact], int]:
        scope = which.get("scope")
        limit, offset = bounds(which)
        listing, counting = Where().equal("scope", scope), Where().equal("scope", scope)
        if not which.get("include_deleted", False):
            counting.add("deleted = ?", False)  # counted from the (deleted, scope) index
            # listed along `created_at` (or the scope's index); `NOT deleted` is no equality,
            # so the planner does not sort every live entry to find the newest fifty
            listing.add("NOT deleted")
        with self._reading() as db:
            rows, total = page(
                db,
                _FACTS,
                "facts",
                listing,
                f"created_at DESC, {db.seq} DESC",
                limit=limit,
                offset=offset,
                counting=counting,
            )
        return [fact_row(r) for r in rows], total

    def fact_scopes(self) -> list[tuple[str, int]]:
        with self._reading() as db:
            return counted_by(db, "facts", "scope", Where().add("deleted = ?", False))

    def recent_events(
        self, *, kinds: Sequence[str], after_id: int = 0, limit: int = 50
    ) -> list[Event]:
        with self._reading() as db:
            rows = db.all(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE {among('kind', kinds)} AND id > ? "
                "ORDER BY id DESC LIMIT ?",
                *kinds,
                after_id,
                limit,
            )
        return [event_from_row(r) for r in rows]

    def add_daily_counts(self, day: str, counts: Mapping[str, int]) -> None:
        items = [(name, int(value)) for name, value in counts.items() if value]
        if not items:
            return
        rows = ", ".join(["(?, ?, ?)"] * len(items))  # one statement for the turn's counters
        with self._writing() as db:
            db.run(
                f"INSERT INTO daily_counts (day, name, value) VALUES {rows} "
                "ON CONFLICT (day, name) DO UPDATE SET value = daily_counts.value + excluded.value",
                *[part for name, value in items for part in (day, name, value)],
            )

    def daily_counts(self, *, since: str) -> dict[str, dict[str, int]]:
        with self._reading() as db:
            rows = db.all(
                "SELECT day, name, value FROM daily_counts WHERE day >= ? ORDER BY day, name",
                since,
            )
        out: dict[str, dict[str, int]] = {}
        for row in rows:
            out.setdefault(str(row["day"]), {})[str(row["name"])] = int(row["value"])
        return out
