"""`memlane mcp`: the MCP server on stdin/stdout, for clients that start it themselves.

Claude Code, Codex and Claude Desktop start the command from their
`mcpServers` configuration; a connection is bound to one namespace for its whole
life: `--namespace`, else the name of the git repository the command runs in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from memlane.config import Settings
from memlane.engine.memory.lifecycle import stop_memory
from memlane.engine.runtime import Runtime
from memlane.files.paths import repository_namespace, repository_root
from memlane.views.tools import Binding


def default_namespace(cwd: Path) -> tuple[str | None, str]:
    """The namespace of the repository `cwd` is in (its folder name), and where that came from.

    This is the value to put in `X-Memlane-Repo` for the proxy's clients of the same
    repository, so the agent's requests and its MCP tools share one namespace.
    """
    root = repository_root(cwd)
    if root is None:
        return None, f"{cwd} is in no git repository: only global memory (pass --namespace)"
    return repository_namespace(root), f"the repository at {root}"


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
        await rt.background.drain()
        await stop_memory(rt)
        rt.close()
