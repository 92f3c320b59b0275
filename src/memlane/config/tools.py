"""Settings of memlane as tools: the MCP server, and the tools the proxy offers upstream models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ToolsSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    mcp_enabled: bool = Field(
        default=True,
        description="Serve the MCP server at /mcp on `memlane serve` (streamable HTTP, admin "
        "token required).",
    )
    mcp_all_namespaces: bool = Field(
        default=False,
        description="Let MCP tool calls name another namespace (`memlane mcp --all-namespaces`); "
        "otherwise a connection sees only its own namespace and global memory.",
    )
    proxy_tools: bool = Field(
        default=False,
        description="Offer memlane_memory_search and memlane_session_ask to the upstream model "
        "and answer its calls before the client sees anything (per request: X-Memlane-Tools).",
    )
    proxy_tools_max_rounds: int = Field(
        default=3,
        ge=1,
        le=10,
        description="How many times memlane answers the model's calls to its tools and asks "
        "the upstream again within one request.",
    )
