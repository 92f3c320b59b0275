"""`memlane serve`: run the proxy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.context import err_console, fail, state


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind (default 8100).")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Processes serving the port on one store (default 1).", min=1, max=64),
    ] = None,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="Upstream OpenAI-compatible base URL.")
    ] = None,
    anthropic_upstream: Annotated[
        str | None,
        typer.Option(
            "--anthropic-upstream",
            help="Anthropic-compatible base URL for /v1/messages (Claude Code).",
        ),
    ] = None,
    harness_root: Annotated[
        Path | None,
        typer.Option("--harness-root", help="Folder whose AGENTS.md is pinned in every session."),
    ] = None,
    scaffold_clients: Annotated[
        str | None,
        typer.Option(
            "--scaffold-clients", help="agentic (default) or all: who gets the session scaffold."
        ),
    ] = None,
    spec_mode: Annotated[
        bool | None,
        typer.Option("--spec-mode/--no-spec-mode", help="Ask for a spec before code changes."),
    ] = None,
) -> None:
    """Run the memory proxy (OpenAI Chat Completions and Responses, Anthropic Messages)."""
    cli = state(ctx)
    cli.adopt_running = False  # this is the proxy others adopt
    cli.overrides.update(
        {
            "host": host,
            "port": port,
            "workers": workers,
            "upstream_url": upstream,
            "anthropic_upstream_url": anthropic_upstream,
            "harness_root": harness_root,
            "scaffold_clients": scaffold_clients,
            "spec_mode": spec_mode,
        }
    )
    loaded = cli.loaded()
    from memlane.proxy.server import ServeError, run

    try:
        run(
            loaded.settings,
            announce=lambda line: err_console.print(line, soft_wrap=True, highlight=False),
            config_file=loaded.config_file,
        )
    except ServeError as exc:
        fail(str(exc))
