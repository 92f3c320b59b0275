"""`memlane mcp`: serve memlane's memory and session tools to an MCP client over stdio."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.context import err_console, fail, state


def mcp(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="Namespace the connection is bound to (default: the git repository's name).",
        ),
    ] = None,
    all_namespaces: Annotated[
        bool,
        typer.Option(
            "--all-namespaces", help="Let a tool call name another namespace (an operator's view)."
        ),
    ] = False,
    session: Annotated[
        str | None,
        typer.Option("--session", help="Session key of the caller (for todo_get / todo_set)."),
    ] = None,
) -> None:
    """Serve memlane's memory and session tools to an MCP client on stdio."""
    cli = state(ctx)
    if all_namespaces:
        cli.overrides["mcp_all_namespaces"] = True
    settings = cli.settings
    from memlane.mcp.stdio import default_namespace, serve
    from memlane.store import StoreError
    from memlane.views.tools import Binding

    where = "--namespace"
    if namespace is None:
        namespace, where = default_namespace(Path.cwd())
    elif not namespace.strip():
        fail("--namespace needs a name (the value your clients send as X-Memlane-Repo)")
    binding = Binding(
        namespace=namespace,
        session_key=session,
        all_namespaces=settings.mcp_all_namespaces,
    )
    err_console.print(
        f"memlane MCP server on stdio: namespace {namespace!r} ({where}); "
        f"home {settings.home_path}",
        highlight=False,
        soft_wrap=True,
    )
    try:
        asyncio.run(serve(settings, binding))
    except StoreError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass
