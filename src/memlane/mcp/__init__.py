"""memlane as an MCP server: the engine's memory and session tools for any MCP client.

`memlane mcp` serves it on stdio (`memlane.mcp.stdio`); `memlane serve` mounts
it as streamable HTTP at `/mcp` (`proxy.mcp_route`). Both build it with
`memlane.mcp.server.build_server` over the same engine and tool catalogue.
"""
