"""Memory and session tools a model can call: one catalogue for the MCP server and the proxy."""

from memlane.views.tools.binding import Binding, ToolRefusal
from memlane.views.tools.catalog import (
    BY_NAME,
    PROXY_PREFIX,
    PROXY_TOOLS,
    TOOLS,
    ToolResult,
    ToolSpec,
    call_tool,
)

__all__ = [
    "BY_NAME",
    "PROXY_PREFIX",
    "PROXY_TOOLS",
    "TOOLS",
    "Binding",
    "ToolRefusal",
    "ToolResult",
    "ToolSpec",
    "call_tool",
]
