"""`memlane config`: what memlane will use, and where each value came from."""

from __future__ import annotations

import typer
from rich.table import Table

from memlane.cli.context import console, print_json, state
from memlane.cli.options import JsonOpt
from memlane.config import effective_values

app = typer.Typer(help="Inspect configuration.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
) -> None:
    """Print every effective setting and where it came from."""
    loaded = state(ctx).loaded()
    values = effective_values(loaded)
    if as_json:
        print_json(
            {
                "config_file": str(loaded.config_file) if loaded.config_file else None,
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
        table.add_row(f"MEMLANE_{key.upper()}", str(value), loaded.sources[key])
    console.print(table)
