"""A real MCP client: the MCP Inspector's CLI lists memlane's tools and calls memory_search.

The Inspector (`@modelcontextprotocol/inspector`, pinned, installed into
`.cache/inspector/` by `scripts/test-clients`) starts `memlane mcp` itself over
stdio, exactly as the MCP guide's generic client configuration does (docs/guides/mcp.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcpserver.conftest import INSPECTOR, MEMLANE, Home

TIMEOUT = 90.0


def inspect(home: Home, tmp_path: Path, *method: str) -> Any:
    if not INSPECTOR.exists():
        pytest.fail(f"the MCP Inspector is not installed at {INSPECTOR}: run scripts/test-clients")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path / "inspector-home"),  # its catalog file goes here
        "MCP_CATALOG_PATH": str(tmp_path / "catalog.json"),
    }
    command = [
        str(INSPECTOR),
        "--cli",
        "-e",
        "MEMLANE_EMBEDDING_BACKEND=hashing",
        "--cwd",
        str(home.repo),
        str(MEMLANE),
        "--home",
        str(home.path),
        "mcp",
        *method,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_inspector_lists_the_tools_and_searches_memory(home: Home, tmp_path: Path) -> None:
    listed = inspect(home, tmp_path, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) >= {"memory_search", "memory_add", "sessions_search", "session_ask"}
    assert tools["memory_search"]["inputSchema"]["required"] == ["query"]
    assert tools["memory_search"]["annotations"]["readOnlyHint"] is True
    assert tools["memory_add"]["annotations"]["readOnlyHint"] is False

    called = inspect(
        home,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "memory_search",
        "--tool-arg",
        "q=release train",
    )
    assert called["isError"] is False
    found = called["content"][0]["text"]
    assert "The release train leaves on Thursdays" in found
    assert "Falcon" not in found
