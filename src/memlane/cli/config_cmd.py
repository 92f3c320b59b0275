"""`memlane config`: what memlane will use, where each value came from, and changing it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memlane.cli.context import cells, console, err_console, fail, print_json, state
from memlane.cli.options import JsonOpt
from memlane.config import ConfigError, effective_values
from memlane.config.editing import (
    checked,
    file_key,
    has_key,
    parsed_value,
    set_key,
    setting_name,
    unset_key,
)
from memlane.config.loader import CONFIG_FILE_NAME
from memlane.files.atomic import write_atomic

app = typer.Typer(help="Inspect and change configuration.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
) -> None:
    """Print every effective setting and where it came from (a bad key is reported, not fatal)."""
    loaded = state(ctx).loaded(lenient=True)
    values = effective_values(loaded)
    if as_json:
        print_json(
            {
                "config_file": str(loaded.config_file) if loaded.config_file else None,
                "problems": list(loaded.warnings),
                "settings": {
                    k: {"value": v, "source": loaded.sources[k]} for k, v in values.items()
                },
            }
        )
        return
    table = Table(title="memlane configuration")
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key, value in values.items():
        table.add_row(*cells(f"MEMLANE_{key.upper()}", str(value), loaded.sources[key]))
    console.print(table)


@app.command("set")
def set_(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="A setting (`upstream_url`, `MEMLANE_PORT`).")],
    value: Annotated[str, typer.Argument(help="Its value, spelled as in the environment.")],
) -> None:
    """Write one setting into config.toml, checked against the setting first."""
    path = config_path(ctx)
    try:
        name = setting_name(key)
        before = _read(path)
        text = set_key(before, name, parsed_value(name, value))
        write_atomic(path, checked(text, path, before=before), mode=0o600)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {path}: {exc}")
    console.print(f"set {name} in {path}", highlight=False, soft_wrap=True)
    _shadowed(name)


@app.command("unset")
def unset(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="A setting to take out of config.toml.")],
) -> None:
    """Remove one setting from config.toml (its default, or the environment's, applies)."""
    path = config_path(ctx)
    try:
        before = _read(path)
        name = file_key(key) if has_key(before, file_key(key)) else setting_name(key)
        after = unset_key(before, name)
        if after != before:
            write_atomic(path, checked(after, path, before=before), mode=0o600)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {path}: {exc}")
    said = f"removed {name} from {path}" if after != before else f"{name} is not set in {path}"
    console.print(said, highlight=False, soft_wrap=True)


def config_path(ctx: typer.Context) -> Path:
    """The file `set`, `unset` and `init` change: `--config`, `MEMLANE_CONFIG`, else the
    home's config.toml (found even when the file has a bad key)."""
    cli = state(ctx)
    if cli.config_file is not None:
        return cli.config_file
    if os.environ.get("MEMLANE_CONFIG"):
        return Path(os.environ["MEMLANE_CONFIG"])
    return cli.loaded(lenient=True).settings.home_path / CONFIG_FILE_NAME


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {exc}")


def _shadowed(name: str) -> None:
    variable = f"MEMLANE_{name.upper()}"
    if variable in os.environ:
        err_console.print(
            f"[yellow]note:[/] {variable} is set in the environment and wins over the file",
            highlight=False,
            soft_wrap=True,
        )
