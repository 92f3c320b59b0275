"""The `memlane` command: one root with global options, one module per command group.

Each group's module is imported only when that command runs: they pull in pydantic,
numpy, httpx and the engine, which `memlane --version` and `memlane --help` never
need. `COMMANDS` names each command's module and its one-line help; the listing in
`memlane --help` is drawn from it, and a test checks it against the commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from memlane import __version__
from memlane.cli.state import CliState


@dataclass(frozen=True)
class Lazy:
    """A command whose module is imported when it runs."""

    module: str
    attribute: str
    """A `typer.Typer` (a command group) or a function (a single command)."""
    help: str
    """Its one-line help, as `memlane --help` lists it."""

    def load(self, name: str) -> Any:
        from memlane.engine.signals import threads_started_here_leave_signals

        with threads_started_here_leave_signals():  # a library's threads never take Ctrl-C
            target = getattr(import_module(self.module), self.attribute)
        if isinstance(target, typer.Typer):  # a group, even of one command (`config show`)
            command: Any = typer.main.get_group(target)
        else:
            single = typer.Typer()
            single.command(name)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command


COMMANDS: dict[str, Lazy] = {
    "init": Lazy(
        "memlane.cli.init_cmd",
        "init",
        "Set up memlane: ask for (or take) the upstreams, probe them, write config.toml.",
    ),
    "serve": Lazy(
        "memlane.cli.serve",
        "serve",
        "Run the memory proxy (OpenAI Chat Completions and Responses, Anthropic Messages).",
    ),
    "chat": Lazy(
        "memlane.cli.chat", "chat", "Talk to the upstream model through memlane, in the terminal."
    ),
    "status": Lazy(
        "memlane.cli.status_cmd",
        "status",
        "The proxy on this home (upstream, uptime, requests and errors in the last hour, "
        "background queue, last extraction, CPU time by part) and the store's session and "
        "memory counts.",
    ),
    "doctor": Lazy(
        "memlane.cli.doctor",
        "doctor",
        "Explain what has been failing (recall, scaffold, governance, extraction) and the fix.",
    ),
    "config": Lazy("memlane.cli.config_cmd", "app", "Inspect and change configuration."),
    "sessions": Lazy(
        "memlane.cli.sessions", "app", "List, inspect, fork, export, import and delete sessions."
    ),
    "memory": Lazy(
        "memlane.cli.memory_code",  # cli.memory's commands, those over time, and code checks
        "app",
        "Long-term memory: add, search, list, show, edit, supersede, history, forget, "
        "reindex, log, export, stale, verify.",
    ),
    "eval": Lazy(
        "memlane.cli.eval_cmd", "app", "Measure memlane: retrieval quality on a conversation file."
    ),
    "store": Lazy(
        "memlane.cli.store_cmd", "app", "Inspect the store and copy it between backends."
    ),
    "connect": Lazy(
        "memlane.cli.connect_cmd",
        "connect",
        "Write Codex's or Claude Code's own configuration so it goes through memlane.",
    ),
    "run": Lazy(
        "memlane.cli.run_cmd",
        "app",
        "Start Codex or Claude Code through memlane (starting the proxy if none runs).",
    ),
    "mcp": Lazy(
        "memlane.cli.mcp_cmd",
        "mcp",
        "Serve memlane's memory and session tools to an MCP client on stdio.",
    ),
}


class LazyGroup(TyperGroup):
    """The root group: lists `COMMANDS` from the table, imports one when it is invoked."""

    listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        lazy = COMMANDS.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        if self.listing:  # the help page only needs the name and the line
            return typer.core.TyperCommand(name=cmd_name, short_help=lazy.help)
        return lazy.load(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        for name in COMMANDS:  # typo suggestions ("Did you mean …?") know every name
            self.commands.setdefault(name, typer.core.TyperCommand(name=name))
        try:
            return super().resolve_command(ctx, args)
        finally:
            for name in COMMANDS:
                self.commands.pop(name, None)


app = typer.Typer(
    name="memlane",
    help="Local-first memory for LLM agents: proxy, long-term memory, sessions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyGroup,
    # Plain help and usage errors at the root: typer's rich renderer imports markdown and
    # syntax highlighting (~0.3 s of CPU); each command's own help is still rich.
    rich_markup_mode=None,
)


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
