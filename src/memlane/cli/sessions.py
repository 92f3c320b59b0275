"""`memlane sessions`: list, inspect, rename, fork, export, import, index, ask and delete sessions.

Every command that names a session accepts its id, an id prefix, its key or
its indexed name, found and printed by `views.sessions` like on the admin API;
one that changes or deletes it takes no fuzzy match on titles.
Everything a script reads has `--json`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memlane.cli.context import (
    cells,
    console,
    err_console,
    escape,
    fail,
    opened_runtime,
    print_json,
    report,
    table_with_ids,
    warn,
)
from memlane.cli.options import JsonOpt
from memlane.cli.sessions_context import context as context_command
from memlane.cli.sessions_rename import rename as rename_command
from memlane.engine.sessions import importing, lifecycle
from memlane.engine.sessions.indexing import index_session
from memlane.engine.sessions.metafile import CorruptMeta, load_meta, meta_path
from memlane.engine.sessions.query import query_session
from memlane.engine.tenancy import OPERATOR, short
from memlane.files.atomic import write_atomic
from memlane.files.git_purge import PurgeError
from memlane.files.projects import display_name
from memlane.store import Store, StoreError
from memlane.text.llm import LLMError
from memlane.types import Session
from memlane.views.sessions import (
    SessionLookupError,
    compaction_json,
    find_session,
    index_cost,
    message_json,
    session_detail,
    session_json,
)

if TYPE_CHECKING:
    from memlane.engine.runtime import Runtime

app = typer.Typer(
    help="List, inspect, fork, export, import and delete sessions.", no_args_is_help=True
)

SessionArg = Annotated[str, typer.Argument(help="Session id, id prefix, key or name.")]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model to use (default: index_model/llm_model).")
]


def _find(store: Store, ref: str, *, exact: bool) -> Session:
    try:
        return find_session(store, ref, tenant=OPERATOR, exact=exact)
    except SessionLookupError as exc:
        fail(str(exc))


@contextmanager
def opened_session(
    ctx: typer.Context, ref: str, *, exact: bool = False
) -> Iterator[tuple[Runtime, Session]]:
    """The runtime, and the session `ref` names (a clear error when it names none or several).

    `exact` for a command that changes or deletes the session: no fuzzy match on titles,
    so a typo or a repeated delete never reaches another session."""
    with opened_runtime(ctx) as rt:
        yield rt, _find(rt.store, ref, exact=exact)


def age(moment: datetime, now: datetime | None = None) -> str:
    """`42s`, `5m`, `3h`, `2d`: how long ago, in the largest whole unit."""
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@app.command("list")
def list_sessions(
    ctx: typer.Context,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Only sessions of this namespace.")
    ] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only sessions with this tag.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, newest activity first: title, messages, age, tokens, cost and project.

    The project is its name (a repository's folder name); `--json` gives its namespace
    (the repository root's path) and `--namespace` filters by it.

    The cost column adds what indexing the session cost to the conversation's own.
    """
    with opened_runtime(ctx) as rt:
        everyone = rt.store.list_sessions(tenant=OPERATOR)
        sessions = [s for s in everyone if namespace is None or s.namespace == namespace]
        if tag is not None:
            wanted = tag.lower()
            sessions = [s for s in sessions if wanted in _tags(s)]
        sessions = sessions[:limit] if limit is not None else sessions
        rows = [session_json(rt.store, s) for s in sessions]
    if as_json:
        print_json(rows)
        return
    if not rows and everyone:
        console.print(
            f"no session matches --namespace / --tag ({len(everyone)} in all: "
            "`memlane sessions list` without them shows every one)"
        )
        return
    if not rows:
        console.print("no sessions yet: they are created on the first user message")
        return
    # Printed ids are prefixes unique among all sessions, as lookup resolves them.
    table, shorts = table_with_ids([s.id for s in everyone])
    table.add_column("title", overflow="ellipsis", ratio=1)
    for column in ("messages", "age", "tokens", "cost"):
        table.add_column(column, no_wrap=True, justify="right")
    table.add_column("project", overflow="fold")
    tenanted = any(s.tenant for s in sessions)  # credential tenancy: whose session it is
    if tenanted:
        table.add_column("tenant", no_wrap=True)
    for session, row in zip(sessions, rows, strict=True):
        row_cells = [
            shorts[session.id],
            row["title"],
            str(session.message_count),
            age(session.updated_at),
            str(session.prompt_tokens + session.completion_tokens),
            f"${session.cost_usd + index_cost(session):.4f}",
            display_name(session.namespace),
        ]
        table.add_row(*cells(*row_cells, *([short(session.tenant)] if tenanted else [])))
    console.print(table)


def _tags(session: Session) -> list[str]:
    tags = session.metadata.get("tags")
    return [str(t).lower() for t in tags] if isinstance(tags, list) else []


@app.command("show")
def show(
    ctx: typer.Context,
    ref: SessionArg,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="Every stored item (tool calls, memlane's own), not just the transcript."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """One session: its metadata, summaries, todo, pinned text and messages."""
    with opened_session(ctx, ref) as (rt, session):
        data = session_detail(rt, session)
        items = rt.store.list_messages(session.id, transcript_only=not show_all)
        data["messages"] = [message_json(m) for m in items]
        data["events"] = len(rt.store.list_events(session.id))
        path = meta_path(rt.settings.sessions_path, session.key, session.tenant)
        data["meta_file"] = str(path)
    try:
        load_meta(path)
    except FileNotFoundError:
        data["meta_file"] = None
    except CorruptMeta as exc:
        warn(str(exc))
    if as_json:
        print_json(data)
        return
    _print_session(data)


def _print_session(data: dict[str, Any]) -> None:
    meta = data["metadata"]
    console.print(f"[bold]{escape(data['title'])}[/]  ({data['id']})", highlight=False)
    lines = [
        ("key", data["key"]),
        ("namespace", data["namespace"]),
        ("parent", data["parent_id"]),
        ("messages", data["message_count"]),
        ("tokens", data["prompt_tokens"] + data["completion_tokens"]),
        ("cost", f"${data['cost_usd']:.4f} (+ ${data['index_cost_usd']:.6f} indexing)"),
        ("description", meta.get("description")),
        ("tags", ", ".join(meta.get("tags", [])) or None),
        ("summary", meta.get("summary")),
        ("running summary", data["summary"] or None),
        ("meta.json", data["meta_file"]),
    ]
    for label, value in lines:
        if value not in (None, ""):
            console.print(f"[dim]{label}:[/] {escape(str(value))}", highlight=False, soft_wrap=True)
    for message in data["messages"]:
        who = message["role"] if message["origin"] == "client" else message["origin"]
        text = message["text"] or ", ".join(c["name"] for c in message["tool_calls"])
        console.print(f"\n[bold]{who}[/] #{message['position']}", highlight=False)
        console.print(text, highlight=False, markup=False, soft_wrap=True)


@app.command("delete")
def delete(
    ctx: typer.Context,
    ref: SessionArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge",
            help="Leave no copy: REWRITE the memory repository's history without the session's "
            "memories (commit ids change) and clean the database's files.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session and everything of it (messages, events, files, memories)."""
    with opened_session(ctx, ref, exact=True) as (rt, session):
        title = lifecycle.session_title(rt.store, session)
        if not yes:
            if not sys.stdin.isatty():
                fail("refusing to delete without confirmation: add --yes")
            if not typer.confirm(f"Delete session {session.id} ({title})?"):
                fail("nothing deleted")
        try:
            lifecycle.delete(rt.store, rt.settings, session, purge=purge)
        except PurgeError as exc:
            fail(str(exc))  # what is done, and what finishes it
        except StoreError as exc:
            fail(f"the session is not deleted: {exc}")
    report(as_json, {"deleted": session.id, "purged": purge}, f"deleted {session.id} ({title})")


@app.command("fork")
def fork(
    ctx: typer.Context,
    ref: SessionArg,
    at: Annotated[
        int | None,
        typer.Option(
            "--at",
            min=0,
            help="Copy only messages before this position (as `show` numbers them; "
            "0 to one past the last).",
        ),
    ] = None,
    key: Annotated[str | None, typer.Option("--key", help="Key of the new session.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """A new session continuing this one (a copy of its history, with a parent link)."""
    with opened_session(ctx, ref) as (rt, source):
        try:
            forked = lifecycle.fork(rt.store, source, new_key=key, at_position=at)
        except lifecycle.ForkPointOutOfRange as exc:
            fail(exc.explain("--at"))
        except StoreError as exc:  # the --key is taken
            fail(str(exc))
        data = session_json(rt.store, forked)
    report(as_json, data, f"forked {source.id} -> {forked.id} (key {forked.key})")


@app.command("export")
def export(
    ctx: typer.Context,
    ref: SessionArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """Write a session as JSON lines (session, messages, events, state)."""
    with opened_session(ctx, ref) as (rt, session):
        lines = list(lifecycle.export_lines(rt.store, session))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        write_atomic(output, text)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    err_console.print(f"exported {session.id} ({len(lines) - 1} entries) to {output}")


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        Path, typer.Argument(help="A file written by `sessions export` (- for stdin).")
    ],
    key: Annotated[
        str | None, typer.Option("--key", help="Import under this key instead of the exported one.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recreate a session from `memlane sessions export` output.

    Every line is checked as the proxy checks a request (roles, keys, namespaces) and
    written in one transaction: a bad file changes nothing. A line may hold up to
    `max_body_bytes`, a file up to 256 MiB; the file is read one line at a time."""
    try:
        stream = sys.stdin.buffer if str(source) == "-" else source.open("rb")
    except OSError as exc:
        fail(f"cannot read {source}: {exc.strerror}")
    with stream, opened_runtime(ctx, create=True) as rt:
        lines = importing.stream_lines(stream, max_line=rt.settings.max_body_bytes)
        try:
            session = importing.import_lines(rt.store, lines, key=key)
        except importing.ImportProblem as exc:
            fail(f"{source}: {exc}")
        except OSError as exc:
            fail(f"cannot read {source}: {exc.strerror}")
        data = session_json(rt.store, session)
    exported = session.metadata.get(importing.IMPORTED_NAME)
    renamed = f"; named {data['name']}: {exported} is another session's" if exported else ""
    report(
        as_json,
        data,
        f"imported {session.id} (key {session.key}, {session.message_count} messages{renamed})",
    )


@app.command("index")
def index(
    ctx: typer.Context, ref: SessionArg, model: ModelOpt = None, as_json: JsonOpt = False
) -> None:
    """Generate the session's name, description, summary and tags now."""
    with opened_session(ctx, ref, exact=True) as (rt, session):
        result = asyncio.run(index_session(rt, session.id, model=model))
    if not result.ok or result.meta is None:
        fail(f"indexing {session.id} failed after {result.attempts} attempt(s): {result.error}")
    data = {
        "id": session.id,
        "attempts": result.attempts,
        "cost_usd": result.cost_usd,
        **result.meta.model_dump(),
    }
    if as_json:
        print_json(data)
        return
    console.print(f"[bold]{escape(result.meta.name)}[/]  ({session.id})", highlight=False)
    console.print(result.meta.description, highlight=False, markup=False, soft_wrap=True)
    console.print(f"[dim]tags:[/] {escape(', '.join(result.meta.tags))}", highlight=False)
    console.print(f"[dim]cost:[/] ${result.cost_usd:.6f} in {result.attempts} attempt(s)")


@app.command("ask")
def ask(
    ctx: typer.Context,
    ref: SessionArg,
    question: Annotated[str, typer.Argument(help="What to ask about the session.")],
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question about a past session (query_session, with a cheap model)."""
    with opened_session(ctx, ref) as (rt, session):
        try:
            answer = asyncio.run(query_session(rt, session, question, model=model))
        except LLMError as exc:
            fail(f"could not ask the model: {exc} (check MEMLANE_LLM_BASE_URL / MEMLANE_LLM_MODEL)")
    if as_json:
        print_json(
            {
                "id": session.id,
                "question": question,
                "answer": answer.text,
                "model": answer.model,
                "cost_usd": answer.cost_usd,
            }
        )
        return
    console.print(answer.text, highlight=False, markup=False, soft_wrap=True)


@app.command("approve-spec")
def approve_spec(ctx: typer.Context, ref: SessionArg, as_json: JsonOpt = False) -> None:
    """Approve the session's spec: Spec Mode stops asking the agent for one."""
    from memlane.engine import scaffold

    with opened_session(ctx, ref, exact=True) as (rt, session):
        scaffold.approve_spec(rt, session.id)
    report(as_json, {"id": session.id, "spec_approved": True}, f"spec approved for {session.id}")


@app.command("compact")
def compact(
    ctx: typer.Context, ref: SessionArg, model: ModelOpt = None, as_json: JsonOpt = False
) -> None:
    """Compact the session's history now (summarised with the session's model)."""
    from memlane.engine.governance.compact import CompactionError, compact_session

    with opened_session(ctx, ref, exact=True) as (rt, session):
        try:
            result = asyncio.run(compact_session(rt, session.id, model=model))
        except (CompactionError, LLMError) as exc:
            fail(str(exc))
    if as_json:
        print_json(compaction_json(result))
        return
    console.print(str(result), highlight=False, markup=False, soft_wrap=True)


@app.command("output")
def output(
    ctx: typer.Context,
    ref: SessionArg,
    output_id: Annotated[
        int | None, typer.Argument(help="Offloaded output id; omit to list them.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the tool outputs governance offloaded, or print one in full."""
    from memlane.engine.governance.ledger import (
        OutputNotFound,
        offloaded_output,
        offloaded_outputs,
        outputs_folder,
    )

    with opened_session(ctx, ref) as (rt, session):
        if output_id is None:
            found = offloaded_outputs(rt.store, session.id)
        else:
            try:
                text = offloaded_output(
                    rt.store, session.id, output_id, folder=outputs_folder(rt.settings, session)
                )
            except OutputNotFound as exc:
                fail(str(exc))
    if output_id is not None:
        sys.stdout.write(text)
        return
    if as_json:
        print_json(found)
        return
    for item in found:
        console.print(
            f"{item['id']}\t{item.get('name') or '-'}\t{item.get('chars')} chars\t"
            f"{item.get('path') or 'in the store'}",
            highlight=False,
            markup=False,
        )


app.command("context")(context_command)
app.command("rename")(rename_command)
