"""What every command shares: loading settings once, opening the store, printing, failing.

Opening a store creates it when it is not there. Only a command that adds to what is
stored (`serve`, `chat`, `memory add`, `sessions import`…) may do that; every other one
(listing, showing, searching, exporting, changing a session or a memory that must
already exist) first asks `missing_store`, and a mistyped `--home` or `MEMLANE_HOME`
gets a one-line refusal instead of a new empty home that looks like lost memory.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from memlane.cli.output import cells, console, err_console, escape, fail, warn
from memlane.cli.state import CliState, state
from memlane.config import Settings
from memlane.store import Store, StoreError, open_store
from memlane.store.factory import sqlite_path
from memlane.store.urls import store_kind
from memlane.types.moments import parse_moment

if TYPE_CHECKING:
    from rich.table import Table

    from memlane.engine.runtime import Runtime

__all__ = [
    "SHORT_ID",
    "CliState",
    "MissingStore",
    "cells",
    "console",
    "err_console",
    "escape",
    "fail",
    "missing_store",
    "moment",
    "opened_runtime",
    "opened_store",
    "print_json",
    "progress_bar",
    "short_ids",
    "state",
    "stored_settings",
    "table_with_ids",
    "warn",
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
def opened_runtime(ctx: typer.Context, *, create: bool = False) -> Iterator[Runtime]:
    """The engine over the configured store, for one command; the store closes after.

    A store that is not there is refused (`stored_settings`); `create` for a command
    that adds to it (`memory add`, `sessions import`), which may start a new home."""
    from memlane.engine.runtime import Runtime

    settings = state(ctx).settings if create else stored_settings(ctx)
    with opened_store(settings) as store:
        yield Runtime(settings, store)


@dataclass(frozen=True)
class MissingStore:
    """A store that is not there: what is missing, and what to do."""

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}: {self.fix}"


def missing_store(settings: Settings, sources: Mapping[str, str]) -> MissingStore | None:
    """Why the configured store cannot be read because it does not exist; None when it does.

    The embedded store is its home: a home exists once `serve` or `init` made it (a home
    holding only `init`'s config.toml is a store with nothing in it yet). `sqlite:///PATH`
    is that file. PostgreSQL's server answers for itself when the store opens.
    `sources` says where each setting came from (`LoadedSettings.sources`), to name it."""
    url = settings.store_url
    if store_kind(url) != "sqlite":
        return None
    if url:
        path = sqlite_path(settings)
        if path.exists():
            return None
        return MissingStore(
            f"no SQLite store at {path} ({_origin(sources.get('store_url'), '--store-url')})",
            "check the path, or create it with `memlane serve` on this store URL",
        )
    home = settings.home_path
    if home.is_dir():
        return None
    if sources.get("home", "default") == "default":
        return MissingStore(
            f"nothing stored yet (no memlane home at {home})",
            "start the proxy with `memlane serve` (`memlane init` first sets up its upstreams)",
        )
    return MissingStore(
        f"no memlane home at {home} ({_origin(sources.get('home'), '--home')})",
        "check the path, or create it with `memlane serve` or `memlane init`",
    )


def _origin(source: str | None, flag: str) -> str:
    """`from --home`, `from MEMLANE_HOME`, `from FILE`: where a setting was set."""
    if not source or source == "flag":
        return f"from {flag}"
    return "from " + source.removeprefix("env ").removeprefix("file ")


def stored_settings(ctx: typer.Context) -> Settings:
    """The settings of a command that reads or changes what is already stored: it fails,
    creating nothing, when the store is not there (`missing_store`)."""
    loaded = state(ctx).loaded()
    missing = missing_store(loaded.settings, loaded.sources)
    if missing is not None:
        fail(str(missing))
    return loaded.settings


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
        console.print(line, highlight=False, markup=False)


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
