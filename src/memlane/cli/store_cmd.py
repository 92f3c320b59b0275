"""`memlane store`: what a store holds, leaving no copy of deleted rows, and copying one store
into another (SQLite <-> PostgreSQL)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memlane.cli.context import (
    console,
    err_console,
    fail,
    missing_store,
    opened_store,
    print_json,
    state,
    stored_settings,
)
from memlane.cli.options import JsonOpt
from memlane.config import Settings
from memlane.store import TABLES, StoreError
from memlane.store.migrate import copy_store, store_counts
from memlane.store.urls import redact, store_kind

app = typer.Typer(help="Inspect the store and copy it between backends.", no_args_is_help=True)


def _settings_for(settings: Settings, url: str | None) -> Settings:
    """The settings with another store URL (None keeps the configured store)."""
    if url is None:
        return settings
    if store_kind(url) is None:
        fail(f"unsupported store URL {redact(url)!r}: use postgresql://… or sqlite:///PATH")
    return settings.model_copy(update={"store_url": url})


@app.command("info")
def info(
    ctx: typer.Context,
    as_json: JsonOpt = False,
) -> None:
    """Print which store is in use and how many rows each table holds."""
    settings = stored_settings(ctx)
    with opened_store(settings) as store:
        counts = store_counts(store)
        url = store.url
    if as_json:
        print_json({"url": url, "tables": counts})
        return
    console.print(f"store: {url}", highlight=False, soft_wrap=True)
    table = Table("table", "rows")
    for name, n in counts.items():
        table.add_row(name, str(n))
    console.print(table)


@app.command("purge")
def purge(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Leave no copy of deleted rows in the store's files: what `--purge` does last.

    Run it when a purge said the database's files may still hold a copy (the session or
    memory itself is deleted by then): SQLite checkpoints and truncates its WAL, which
    keeps older versions of the pages the deleted rows were on; PostgreSQL rewrites the
    tables that held them (`VACUUM FULL`, which locks each table while it runs)."""
    settings = stored_settings(ctx)
    with opened_store(settings) as store:
        try:
            store.purge_deleted()
        except StoreError as exc:
            fail(f"the store's files are not purged: {exc}; run it again once the cause is fixed")
        url = store.url
    if as_json:
        print_json({"url": url, "purged": True})
        return
    console.print(f"purged the deleted rows' copies from {url}", highlight=False, soft_wrap=True)


@app.command("migrate")
def migrate(
    ctx: typer.Context,
    to_url: Annotated[
        str,
        typer.Option(
            "--to", help="Store to copy into (must be empty): postgresql://… or sqlite:///PATH."
        ),
    ],
    from_url: Annotated[
        str | None,
        typer.Option("--from", help="Store to copy from (default: the configured store)."),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Rows per write transaction.")
    ] = 500,
    as_json: JsonOpt = False,
) -> None:
    """Copy every session, message, event, fact and vector into an empty store, then verify counts.

    Stop the proxies that write to the source first: a row added during the copy
    makes the count check fail (nothing in the source is ever changed).
    """
    loaded = state(ctx).loaded()
    source_settings = _settings_for(loaded.settings, from_url)
    target_settings = _settings_for(loaded.settings, to_url)
    sources = {**loaded.sources, "store_url": "--from"} if from_url else loaded.sources
    missing = missing_store(source_settings, sources)  # the target is made if need be
    if missing is not None:
        fail(str(missing))
    with opened_store(source_settings) as source, opened_store(target_settings) as target:
        if source.url == target.url:
            fail(f"--from and --to are the same store ({source.url}); name two different stores")
        try:
            if as_json:
                copies = copy_store(source, target, batch_size=batch_size)
            else:
                with Progress(
                    TextColumn("{task.description:<14}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=err_console,
                ) as bar:
                    tasks = {name: bar.add_task(name, total=None) for name in TABLES}

                    def report(table: str, done: int, total: int) -> None:
                        bar.update(tasks[table], completed=done, total=total)

                    copies = copy_store(source, target, batch_size=batch_size, progress=report)
        except StoreError as exc:
            fail(str(exc))
        summary = {
            "from": source.url,
            "to": target.url,
            "tables": {c.table: {"source": c.source, "target": c.target} for c in copies},
            "verified": all(c.ok for c in copies),
        }
    if as_json:
        print_json(summary)
        return
    rows = sum(c.target for c in copies)
    console.print(
        f"copied {rows} rows from {summary['from']} to {summary['to']}; every count matches",
        highlight=False,
        soft_wrap=True,
    )
