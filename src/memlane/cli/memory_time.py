"""`memlane memory supersede` and `memlane memory history`: facts over time.

A memory that stops being true is closed, not rewritten: `supersede` closes it
at a date and adds the new version from then (both kept, linked both ways);
`history` prints the chain of versions, each with the interval it was true and
the message that caused it. `memory search --as-of DATE` asks what was true then.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from memlane.cli.context import (
    cells,
    console,
    opened_runtime,
    print_json,
    report,
    table_with_ids,
)
from memlane.cli.memory import IdArg, _run, app
from memlane.cli.options import JsonOpt, date_option
from memlane.engine.memory import manage
from memlane.engine.memory.versions import Version, interval
from memlane.views.memories import memory_json

__all__ = ["app", "history", "supersede"]


@app.command("supersede")
def supersede(
    ctx: typer.Context,
    memory_id: IdArg,
    text: Annotated[str, typer.Argument(help="The new version, as one standalone sentence.")],
    at: Annotated[datetime | None, date_option("--at", "When it changed (default: now).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Close memory ID at --at and add TEXT as its next version, true from then."""
    with opened_runtime(ctx) as rt:
        closed, new = _run(rt, manage.supersede_memory(rt, memory_id, text, at=at))
    report(
        as_json,
        {"closed": memory_json(closed), "new": memory_json(new)},
        f"{closed.id} closed ({interval(closed)}), replaced by {new.id}",
    )


def version_json(version: Version) -> dict[str, Any]:
    cause = version.cause
    return memory_json(version.fact) | {
        "current": version.current,
        "cause": None
        if cause is None
        else {
            "session_id": cause.session_id,
            "message_id": cause.id,
            "at": cause.created_at.isoformat(),
            "text": cause.message.text,
        },
    }


@app.command("history")
def history(ctx: typer.Context, memory_id: IdArg, as_json: JsonOpt = False) -> None:
    """Every version of memory ID, oldest first: when each was true and what caused it."""
    with opened_runtime(ctx) as rt:
        versions = _run(rt, manage.memory_versions(rt, memory_id))
    if as_json:
        print_json([version_json(v) for v in versions])
        return
    table, shorts = table_with_ids([v.fact.id for v in versions], show_lines=False)
    table.add_column("true", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1, min_width=24)
    table.add_column("from message", overflow="fold", ratio=1)
    for version in versions:
        fact, cause = version.fact, version.cause
        state = "" if version.current else f" ({version.state})"
        source = ""
        if cause is not None:
            source = f"{cause.created_at:%Y-%m-%d %H:%M}: {cause.message.text}"
        elif fact.source_session:
            source = f"session {fact.source_session}"
        table.add_row(*cells(shorts[fact.id], interval(fact) + state, fact.text, source))
    console.print(table)
