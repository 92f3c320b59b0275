"""`memlane connect` on a home of its own: the MCP server the client starts opens that home.

A client starts the MCP server with its own environment, not the shell's, so a
`--home` (or `MEMLANE_HOME`) the user gave `connect` must be written into the entry.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memlane.cli.running import PLAIN_HOME, home_options
from tests.mcpserver.conftest import MEMLANE


def test_home_options_name_a_home_and_a_config_file_only_when_they_are_not_the_plain_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMLANE_CONFIG", raising=False)
    assert home_options(PLAIN_HOME, None) == ()
    assert home_options(tmp_path / "h", None) == ("--home", str(tmp_path / "h"))
    config = tmp_path / "c.toml"
    assert home_options(PLAIN_HOME, config) == ("--config", str(config))
    monkeypatch.setenv("MEMLANE_CONFIG", str(config))
    assert home_options(tmp_path / "h", None) == (
        "--home",
        str(tmp_path / "h"),
        "--config",
        str(config),
    )


@pytest.fixture
def connected(tmp_path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """A memory added to a home named by `MEMLANE_HOME`, then `memlane connect codex` run
    with it: the MCP entry written, and the environment Codex starts it with (its own,
    without `MEMLANE_HOME`)."""
    home, user_home = tmp_path / "work-home", tmp_path / "user"
    codex_home = user_home / ".codex"
    codex_home.mkdir(parents=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(user_home),
        "CODEX_HOME": str(codex_home),
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
    }
    shell = {**env, "MEMLANE_HOME": str(home)}
    added = [str(MEMLANE), "memory", "add", "The staging database is called heron"]
    subprocess.run(added, env=shell, check=True, capture_output=True, timeout=120)
    connect = [str(MEMLANE), "connect", "codex"]
    subprocess.run(connect, env=shell, check=True, capture_output=True, timeout=120)
    entry = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["memlane"]
    assert entry["args"] == ["--home", str(home), "mcp"]
    return entry, env


async def test_the_mcp_server_codex_starts_after_connect_reads_the_connected_home(
    connected: tuple[dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    entry, env = connected
    server = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=env, cwd=str(tmp_path)
    )
    async with Client(server, read_timeout_seconds=60) as client:
        found = await client.call_tool("memory_search", {"query": "staging database"})
    assert "heron" in "\n".join(block.text for block in found.content)  # type: ignore[union-attr]
