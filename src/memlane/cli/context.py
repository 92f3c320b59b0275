"""What every command shares: loading settings once, opening the store, printing, failing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from memlane.cli.output import console, err_console, fail
from memlane.cli.state import CliState, state
from memlane.config import Settings
from memlane.store import Store, StoreError, open_store
from memlane.types.moments import parse_moment

if TYPE_CHECKING:
    from rich.table import Table

    from memlane.engine.runtime import Runtime

__all__ = [
    "SHORT_ID",
    "CliState",
    "console",
    "err_console",
    "fail",
    "moment",
    "opened_runtime",
    "opened_store",
    "print_json",
    "progress_bar",
    "short_ids",
    "state",
    "table_with_ids",
]


@contextmanager
def opened_store(settings: Settings) -> Iterator[Store]:
    try:
        store = open_store(settings)
    except StoreError as exc:
        fail(str(exc))
    try:
        yield store
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()


@contextmanager
def opened_runtime(ctx: typer.Context) -> Iterator[Runtime]:
    """The engine over the configured store, for one command; the store closes after."""
    from memlane.engine.runtime import Runtime

    settings = state(ctx).settings
    with opened_store(settings) as store:
        yield Runtime(settings, store)


def progress_bar() -> Progress:
    """The bar long work shows on stderr (stdout stays clean for `--json`); it clears itself."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
    )


SHORT_ID = 10


def short_ids(ids: Sequence[str], *, minimum: int = SHORT_ID) -> dict[str, str]:
    """Each id mapped to its shortest prefix (at least `minimum`) no other id shares.

    Tables print these instead of letting the terminal cut ids with an ellipsis: every
    command that takes an id takes a unique prefix, so what is printed can be pasted.
    Neighbours in sorted order are the only ids that can share a longer prefix.
    """
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, current in enumerate(ordered):
        shared = 0
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                shared = max(shared, _common_prefix(current, ordered[j]))
        out[current] = current[: max(minimum, shared + 1)]
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def table_with_ids(ids: Sequence[str], **options: Any) -> tuple[Table, dict[str, str]]:
    """A table (`options` for rich's `Table`) whose first column is the row's id, and each
    of `ids` mapped to the prefix to print there (`short_ids`). The column is never
    wrapped and wide enough for those prefixes: what a person copies names the row in the
    next command."""
    from rich.table import Table  # rich's tables only for commands that print one

    table = Table(**options)
    table.add_column("id", no_wrap=True, min_width=SHORT_ID)
    return table, short_ids(ids)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def report(as_json: bool, data: Any, line: str) -> None:
    """A command's result: `data` as JSON for a script (`--json`), else `line` for a person."""
    if as_json:
        print_json(data)
    else:
        console.print(line, highlight=False)


def moment(text: str | None, option: str) -> datetime | None:
    """A date or time a person typed, read as every face reads one (`types.moments`):
    `2026-02-15` (00:00 UTC that day), an ISO 8601 time (`2026-02-15T09:30`, UTC unless it
    names its offset) or `now`; a clear error else."""
    if text is None:
        return None
    try:
        return parse_moment(text)
    except ValueError as exc:
        fail(f"{option} {exc}")
