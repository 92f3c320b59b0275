"""What a `SearchFilter` allows, as conditions on the `docs` columns, for every backend.

Each backend renders the conditions in its own SQL (the SQLite one keeps the
planner on the candidates it drives with; the PostgreSQL one binds arrays),
but which columns are restricted, and that a fact-role restriction leaves
messages and events alone, is decided here once.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.store.base import SearchFilter
from memlane.store.documents import TURN_ROLES


@dataclass(frozen=True, slots=True)
class Condition:
    """`column` is one of `values` (none: no document passes)."""

    column: str
    values: tuple[str, ...]
    facts_only: bool = False
    """Only fact documents are held to it; messages and events pass."""

    @property
    def one(self) -> str | None:
        """The single value of an equality test (a session), else None."""
        return self.values[0] if self.column == "session_id" else None


def conditions(flt: SearchFilter) -> list[Condition]:
    """The conditions a document must meet besides being active, in a fixed order."""
    out = [Condition("kind", tuple(flt.kinds))]
    if flt.scopes is not None:
        out.append(Condition("scope", tuple(flt.scopes)))
    if flt.session_id is not None:
        out.append(Condition("session_id", (flt.session_id,)))
    if flt.fact_roles is not None:
        out.append(Condition("role", tuple(flt.fact_roles), facts_only=True))
    return out


def turns_left_out_sql(alias: str, mark: str) -> str:
    """`SearchFilter.turns_left_out` over the `docs` alias, `mark` binding the scope: a
    document passes unless it is a remembered turn (a fact of a turn's role) of that scope."""
    roles = ", ".join(f"'{role}'" for role in TURN_ROLES)
    return (
        f"NOT ({alias}.kind = 'fact' AND {alias}.scope = {mark} "
        f"AND coalesce({alias}.role, '') IN ({roles}))"
    )


def validity_sql(alias: str, mark: str) -> str:
    """The `SearchFilter.valid_at` test over the `docs` alias, `mark` binding the moment:
    a fact document passes unless its fact was closed by then or had not started yet.

    Validity lives in `facts` (one place, what a hand edit of a file changes), not in
    the index. The facts that fail the test at the current time are few (those
    replaced, and those not yet true) and found through two indexes (`facts_valid_to`,
    `facts_valid_from`), once per search; each candidate document is then one hash
    probe, whatever the number of facts or of candidates. (An as-of search in the past
    also leaves out every fact begun since: it pays for those, the request path never.)
    """
    return (
        f"({alias}.kind <> 'fact' OR {alias}.ref NOT IN (SELECT vf.id FROM facts vf "
        f"WHERE vf.valid_to <= {mark} OR coalesce(vf.valid_from, vf.created_at) > {mark}))"
    )
