"""The `memlane` command: one root with global options, one module per command group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane import __version__
from memlane.cli import (
    chat,
    config_cmd,
    doctor,
    eval_cmd,
    mcp_cmd,
    memory,
    serve,
    sessions,
    status_cmd,
    store_cmd,
)
from memlane.cli.context import CliState

app = typer.Typer(
    name="memlane",
    help="Local-first memory for LLM agents: proxy, long-term memory, sessions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(config_cmd.app, name="config")
app.add_typer(sessions.app, name="sessions")
app.add_typer(memory.app, name="memory")
app.add_typer(eval_cmd.app, name="eval")
app.add_typer(store_cmd.app, name="store")
app.command("serve")(serve.serve)
app.command("chat")(chat.chat)
app.command("status")(status_cmd.status)
app.command("doctor")(doctor.doctor)
app.command("mcp")(mcp_cmd.mcp)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memlane {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML config file (default: $MEMLANE_HOME/config.toml)."),
    ] = None,
    home: Annotated[
        Path | None, typer.Option("--home", help="Data home (default: ~/.local/share/memlane).")
    ] = None,
    store_url: Annotated[
        str | None, typer.Option("--store-url", help="postgresql://… to use PostgreSQL.")
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    ctx.obj = CliState(config_file=config, overrides={"home": home, "store_url": store_url})


def main() -> None:
    app()
