"""Settings of memlane as tools: the MCP server, and the tools the proxy offers upstream models."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memlane.config.fields import SettingsPart


class ToolsSettings(SettingsPart):
    mcp_enabled: bool = True
    """Serve the MCP server at /mcp on `memlane serve` (streamable HTTP, admin token required)."""

    mcp_all_namespaces: bool = False
    """Let MCP tool calls name another namespace (`memlane mcp --all-namespaces`); otherwise a
    connection sees only its own namespace and global memory."""

    proxy_tools: bool = False
    """Offer memlane_memory_search and memlane_session_ask to the upstream model and answer its
    calls before the client sees anything (per request: X-Memlane-Tools)."""

    proxy_tools_max_rounds: Annotated[int, Field(ge=1, le=10)] = 3
    """How many times memlane answers the model's calls to its tools and asks the upstream again
    within one request."""
