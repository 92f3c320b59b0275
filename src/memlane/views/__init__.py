"""What the faces show: sessions and memories as JSON, and finding them from a reference.

Between the engine and the faces (CLI, admin API, MCP, web inspector): every face
renders and looks up through here, so each concept has one shape and one rule.
"""
