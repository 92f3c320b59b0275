"""`memlane memory`: add, search, list, show, edit, forget, reindex, log and export memories
(`supersede` and `history`, facts over time, are in `cli.memory_time`; `stale` and
`verify`, memories whose code moved on, in `cli.memory_code`).

Scopes are written `global`, `ns:<namespace>` (a repo; by default the session
key) or `conv:<session id>`; lists and searches show each memory as about the `user`
(global: recalled in every session), a `project` (its namespace) or a `conversation`.
Dates are `YYYY-MM-DD` (00:00 UTC) or ISO 8601 times. Everything a script reads has `--json`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import tempfile
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from memlane.cli.context import (
    cells,
    console,
    escape,
    fail,
    opened_runtime,
    print_json,
    progress_bar,
    report,
    table_with_ids,
    warn,
)
from memlane.cli.options import JsonOpt, date_option
from memlane.engine.memory import manage
from memlane.engine.memory.recall import recall
from memlane.engine.memory.scopes import GLOBAL, parse_scope, where
from memlane.engine.memory.versions import interval
from memlane.engine.runtime import Runtime
from memlane.files.git import GitError
from memlane.files.git_purge import PurgeError
from memlane.store import StoreError
from memlane.types import Fact, FactRole
from memlane.views.memories import memory_json

app = typer.Typer(
    help="Long-term memory: add, search, list, show, edit, supersede, history, forget, "
    "reindex, log, export, stale, verify.",
    no_args_is_help=True,
)

T = TypeVar("T")
IdArg = Annotated[
    str, typer.Argument(help="Memory id, or a unique prefix (see `memlane memory list`).")
]
ROLES = ("memory", "user", "assistant", "summary")


def _run(rt: Runtime, coro: Coroutine[Any, Any, T]) -> T:
    """Run one command's coroutine; background work (git commits) finishes before exit."""

    async def main() -> T:
        try:
            return await coro
        finally:
            await rt.settle()

    try:
        return asyncio.run(main())
    except manage.MemoryNotFound as exc:
        fail(str(exc.args[0]))
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:  # the memory folder read-only, the disk full
        fail(
            f"could not write the memory's files: {exc}; check that "
            f"{rt.settings.memory_path} is writable and the disk has room"
        )


def _scope(text: str) -> str:
    try:
        return parse_scope(text)
    except ValueError as exc:
        fail(str(exc))


def _role(text: str | None) -> FactRole | None:
    if text is None:
        return None
    if text not in ROLES:
        fail(f"invalid role {text!r}: use one of {', '.join(ROLES)}")
    return text  # type: ignore[return-value]


def _table(facts: list[Fact], scores: list[float] | None = None) -> Table:
    table, shorts = table_with_ids([f.id for f in facts], show_lines=False)
    table.add_column("about", overflow="fold", max_width=28)
    table.add_column("role", no_wrap=True)
    table.add_column("when", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1, min_width=24)
    if scores is not None:
        table.add_column("score")
    for i, fact in enumerate(facts):
        row = [
            shorts[fact.id],
            where(fact.scope),
            fact.role + (" (deleted)" if fact.deleted else ""),
            interval(fact) if fact.role == "memory" else f"{fact.since:%Y-%m-%d %H:%M}",
            fact.text,
        ]
        if scores is not None:
            row.append(f"{scores[i]:.3f}")
        table.add_row(*cells(*row))
    return table


@app.command("add")
def add(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to remember, as one standalone sentence.")],
    scope: Annotated[str, typer.Option("--scope", help="global, ns:<name> or conv:<id>.")] = GLOBAL,
    role: Annotated[str, typer.Option("--role", help=f"One of {', '.join(ROLES)}.")] = "memory",
    valid_from: Annotated[
        datetime | None, date_option("--valid-from", "True since this date (default: now).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember TEXT as it is (no extraction, no reconciliation)."""
    chosen = _role(role) or "memory"
    with opened_runtime(ctx, create=True) as rt:
        fact = _run(
            rt,
            manage.add_memory(rt, text, scope=_scope(scope), role=chosen, valid_from=valid_from),
        )
    report(as_json, memory_json(fact), f"remembered {fact.id} in {fact.scope}")


@app.command("search")
def search_cmd(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="Scope to search (repeatable; default: every scope)."),
    ] = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", min=1, max=100, help="How many to show (default: memory_top_k)."),
    ] = None,
    as_of: Annotated[
        datetime | None, date_option("--as-of", "What was true then (default: now).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find memories true now (or at --as-of) the way the proxy's read path does.

    Hybrid search, recency and MMR, as recall ranks; a question about change also finds
    the versions that were replaced. A score is relevance relative to this search's best
    match (1.0), blended with recency: the same scale for facts, turns and summaries."""
    wanted = [_scope(s) for s in scope] if scope else None  # an operator may search everything
    with opened_runtime(ctx) as rt:
        if top_k is not None:
            rt = Runtime(rt.settings.model_copy(update={"memory_top_k": top_k}), rt.store)

        async def go() -> list[tuple[Fact, float]]:
            await rt.memory_book.ready()
            found = await recall(rt, query, scopes=wanted, as_of=as_of, distinct=False)
            facts = [await manage.get_memory(rt, r.candidate.ref) for r in found]
            return [(f, r.candidate.score) for f, r in zip(facts, found, strict=True)]

        results = _run(rt, go())
    if as_json:
        print_json([memory_json(f, s) for f, s in results])
    elif not results:
        console.print("no memories found")
    else:
        console.print(_table([f for f, _ in results], [s for _, s in results]))


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    role: Annotated[str | None, typer.Option("--role", help="Only this role.")] = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include forgotten ones.")] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Show at most this many.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List memories, oldest first."""
    chosen = _role(role)
    with opened_runtime(ctx) as rt:
        facts = _run(
            rt,
            manage.list_memories(
                rt,
                scope=_scope(scope) if scope else None,
                roles=(chosen,) if chosen else None,
                include_deleted=deleted,
                limit=limit,
            ),
        )
    if as_json:
        print_json([memory_json(f) for f in facts])
    else:
        console.print(_table(facts) if facts else "no memories")


@app.command("show")
def show(ctx: typer.Context, memory_id: IdArg, as_json: JsonOpt = False) -> None:
    """Show one memory with its provenance and its file."""
    with opened_runtime(ctx) as rt:
        fact = _run(rt, manage.get_memory(rt, memory_id))
        path = manage.memory_file(rt, fact)
    data = memory_json(fact) | {"file": str(path) if path else None}
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        if key != "text" and value is not None:
            console.print(f"[bold]{key}[/]: {escape(str(value))}", highlight=False)
    console.print()
    console.print(fact.text, highlight=False, markup=False)


@app.command("edit")
def edit(
    ctx: typer.Context,
    memory_id: IdArg,
    text: Annotated[
        str | None, typer.Option("--text", help="New text (default: open $EDITOR).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Correct a memory's text (same id); without --text, edit it in $EDITOR."""
    with opened_runtime(ctx) as rt:
        if text is None:
            current = _run(rt, manage.get_memory(rt, memory_id))
            text = _edit_in_editor(current.text)
        fact = _run(rt, manage.edit_memory(rt, memory_id, text))
    report(as_json, memory_json(fact), f"edited {fact.id}")


def _edit_in_editor(text: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        fail("no editor: set $EDITOR, or pass --text")
    with tempfile.NamedTemporaryFile("w+", suffix=".md", delete=False) as handle:
        handle.write(text + "\n")
        name = handle.name
    try:
        try:
            exited = subprocess.call([*shlex.split(editor), name])
        except OSError as exc:
            fail(f"the editor {editor!r} could not start ({exc}): set $EDITOR, or pass --text")
        if exited != 0:
            fail("the editor exited with an error; nothing changed")
        return Path(name).read_text(encoding="utf-8")
    finally:
        Path(name).unlink(missing_ok=True)


@app.command("forget")
def forget(
    ctx: typer.Context,
    memory_id: IdArg,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge",
            help="Keep nothing of it nor of its other versions (those it replaced and those "
            "that replaced it, the current one too): remove their files and rows, and REWRITE "
            "the memory repository's history without them (commit ids change).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget a memory: its file moves under deleted/ (soft delete) and it leaves the index."""
    with opened_runtime(ctx) as rt:
        try:
            fact = _run(rt, manage.forget_memory(rt, memory_id, purge=purge))
        except PurgeError as exc:
            fail(str(exc))  # what is done, and what finishes it
        except (GitError, StoreError) as exc:
            fail(f"the memory is not forgotten: {exc}")
    said = f"purged {fact.id} and every version of it" if purge else f"forgot {fact.id}"
    report(as_json, memory_json(fact) | {"purged": purge}, said)


@app.command("reindex")
def reindex(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Rebuild the search index from the Markdown files, index every remembered turn
    again with its date and neighbours, and embed what needs it (dense retrieval on)."""
    with opened_runtime(ctx) as rt, progress_bar() as bar:
        reading = bar.add_task("reading files", total=None)
        turns = bar.add_task("indexing turns with their neighbours", total=None, visible=False)
        embedding = bar.add_task("embedding", total=None, visible=False)

        def read(done: int, total: int | None) -> None:
            bar.update(reading, completed=done, total=total)

        def turn(done: int, total: int) -> None:
            bar.update(turns, completed=done, total=total, visible=True)

        def embed(done: int, total: int | None) -> None:
            bar.update(embedding, completed=done, visible=True)

        report = _run(rt, rt.memory_book.sync_files(read, embed))
        try:
            rebuilt = rt.store.reindex_turns(turn)
        except StoreError as exc:
            fail(str(exc))
    data = {
        "scanned": report.scanned,
        "indexed": report.indexed,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "embedded": report.embedded,
        "turn_documents": rebuilt,
        "skipped": report.skipped,
    }
    if as_json:
        print_json(data)
        return
    console.print(
        f"{report.scanned} files: {report.indexed} indexed, {report.unchanged} unchanged, "
        f"{report.removed} removed from the index, {report.embedded} embedded, "
        f"{rebuilt} turn documents rebuilt"
    )
    for why in report.skipped:
        warn(why, label="skipped")


@app.command("log")
def log(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The memory's git history, newest first."""
    with opened_runtime(ctx) as rt:
        git = rt.memory_book.git
        if git is None:
            fail(
                "no history: memory_git is off, git is missing, or the store is PostgreSQL "
                "(use `memlane memory export --git`)"
            )
        try:
            entries = asyncio.run(git.log(limit=limit))
        except GitError as exc:
            fail(str(exc))
    if as_json:
        print_json([{"commit": e.commit, "date": e.date, "message": e.message} for e in entries])
        return
    for entry in entries:
        first, _, rest = entry.message.partition("\n")
        console.print(
            f"[yellow]{entry.commit[:10]}[/] {entry.date} {escape(first)}", highlight=False
        )
        if rest.strip():
            console.print(rest.strip(), highlight=False, markup=False)


@app.command("export")
def export(
    ctx: typer.Context,
    destination: Annotated[Path, typer.Argument(help="Folder to write the Markdown tree into.")],
    git: Annotated[
        bool, typer.Option("--git", help="Commit the tree in a git repository.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write every memory (forgotten ones under deleted/) as Markdown files."""
    target = destination.expanduser()
    if target.exists() and not target.is_dir():
        fail(f"{target} exists and is not a folder")
    with opened_runtime(ctx) as rt, progress_bar() as bar:
        task = bar.add_task("writing files", total=None)

        def step(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        count = _run(rt, manage.export_tree(rt, target, git=git, progress=step))
    report(
        as_json, {"exported": count, "path": str(target)}, f"exported {count} memories to {target}"
    )
