"""`memlane mcp`: the MCP server on stdin/stdout, for clients that start it themselves.

Claude Code, Codex and Claude Desktop start the command from their
`mcpServers` configuration; a connection is bound to one namespace for its whole
life: `--namespace`, else the project the command runs in (`files.projects`: the git
repository root's absolute path, else the folder's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from memlane.config import Settings
from memlane.engine.memory.lifecycle import stop_memory
from memlane.engine.runtime import Runtime
from memlane.files.paths import repository_root
from memlane.files.projects import project_of
from memlane.views.tools import Binding


def default_namespace(cwd: Path) -> tuple[str | None, str]:
    """The namespace of the project `cwd` is in (the repository root's absolute path, else the
    folder's), and where that came from: the namespace the proxy gives an agent that works
    in the same folder, so the agent's requests and its MCP tools share one namespace."""
    project = project_of(cwd.absolute())
    if project is None:
        return None, f"{cwd} names no folder: only global memory (pass --namespace)"
    root = repository_root(cwd)
    where = f"the repository at {root}" if root is not None else f"the folder {cwd}"
    return project.namespace, where


async def serve(settings: Settings, binding: Binding) -> None:
    """Serve until the client closes stdin; queued memory commits are written before exit."""
    from memlane.mcp.server import build_server
    from memlane.store import open_store

    store = await asyncio.to_thread(open_store, settings)
    rt = Runtime(settings, store)

    def fixed(_headers: Mapping[str, str] | None) -> Binding:
        return binding

    try:
        await build_server(lambda: rt, fixed).run_stdio_async()
    finally:
        await rt.settle()
        await stop_memory(rt)
        rt.close()
