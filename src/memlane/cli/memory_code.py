"""`memlane memory stale` and `memlane memory verify`: memories whose code moved on.

A memory that names project files records what they held when it was noted; `stale`
lists the memories whose files changed, moved or vanished since, and `verify` checks
one and, with `--confirm`, records the files as they are now (the memory still holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli.context import (
    cells,
    console,
    escape,
    opened_runtime,
    print_json,
    table_with_ids,
)
from memlane.cli.memory import IdArg, _run
from memlane.cli.memory_time import app
from memlane.cli.options import JsonOpt
from memlane.engine.memory.stale import Staleness
from memlane.engine.memory.verify import stale_memories, verify_memory
from memlane.types import Fact
from memlane.views.memories import code_json, memory_json

__all__ = ["app", "stale", "verify"]


@app.command("stale")
def stale(
    ctx: typer.Context,
    project: Annotated[
        Path | None,
        typer.Option("--project", help="Only memories of this project folder (default: all)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Memories whose cited project files changed, moved or were deleted since noted."""
    with opened_runtime(ctx) as rt:
        found = _run(rt, stale_memories(rt, folder=str(project) if project else None))
    if as_json:
        print_json([_json(fact, status) for fact, status in found])
        return
    if not found:
        console.print("no stale memories: every cited file is as it was noted")
        return
    table, shorts = table_with_ids([f.id for f, _ in found], show_lines=False)
    table.add_column("status", no_wrap=True)
    table.add_column("what moved on", overflow="fold", ratio=1)
    table.add_column("text", overflow="fold", ratio=1, min_width=24)
    for fact, status in found:
        table.add_row(*cells(shorts[fact.id], status.status, status.note, fact.text))
    console.print(table)


@app.command("verify")
def verify(
    ctx: typer.Context,
    memory_id: IdArg,
    confirm: Annotated[
        bool,
        typer.Option(
            "--confirm", help="Record the cited files as they are now: the memory still holds."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the project files memory ID cites against what they held when it was noted."""
    with opened_runtime(ctx) as rt:
        fact, status = _run(rt, verify_memory(rt, memory_id, confirm=confirm))
    if as_json:
        print_json(_json(fact, status) | {"confirmed": confirm and fact.cites is not None})
        return
    if status.status == "unchecked":
        why = (
            "cites no project file" if fact.cites is None else "its project is not on this machine"
        )
        console.print(f"{fact.id}: not checked ({escape(why)})", highlight=False)
        return
    done = "confirmed; " if confirm else ""
    console.print(f"{fact.id}: {done}{status.status}", highlight=False)
    for file in status.files:
        console.print(f"  {escape(file.said)}", highlight=False)
    if status.stale and not confirm:
        console.print("run again with --confirm if the memory still holds", highlight=False)


def _json(fact: Fact, status: Staleness) -> dict[str, Any]:
    return memory_json(fact) | {"code": code_json(status)}
