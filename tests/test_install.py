"""`uv tool install` puts a working `memlane` on PATH, from a fresh clone.

The clone is made from this checkout's last commit and installed as a tool into a
temporary folder (`UV_TOOL_DIR`, `UV_TOOL_BIN_DIR`), offline from uv's cache (which
`scripts/bootstrap` and earlier installs fill; a cold cache falls back to the package
registry once). Then `memlane` is run as a user runs it, found on PATH: `--version`,
and `memlane mcp` answers an MCP client's initialize handshake and lists its tools.
The install must not pull torch (a dependency of a dependency once did, 5.8 GB).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
UV = ROOT / ".venv" / "bin" / "uv"
INSTALL_TIMEOUT = 300


def uv_tool_install(clone: Path, tools: Path, bin_dir: Path) -> None:
    env = {**os.environ, "UV_TOOL_DIR": str(tools), "UV_TOOL_BIN_DIR": str(bin_dir)}
    command = [str(UV), "tool", "install", "--quiet", str(clone)]
    offline = subprocess.run(
        [*command, "--offline"], env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
    )
    if offline.returncode == 0:
        return
    online = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
    )
    assert online.returncode == 0, f"uv tool install failed:\n{offline.stderr}\n{online.stderr}"


@dataclass(frozen=True)
class Installed:
    memlane: str
    path: str
    """PATH with the tool's bin folder first."""
    tools: Path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    clone, tools, bin_dir = root / "clone", root / "tools", root / "bin"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=60)
    uv_tool_install(clone, tools, bin_dir)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    memlane = shutil.which("memlane", path=path)
    assert memlane == str(bin_dir / "memlane")  # the installed one, found on PATH
    return Installed(memlane, path, tools)


def test_the_installed_memlane_runs_from_path_without_torch(installed: Installed) -> None:
    version = subprocess.run(
        ["memlane", "--version"],
        env={**os.environ, "PATH": installed.path},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.startswith("memlane ")
    assert not list(installed.tools.glob("memlane/lib/python*/site-packages/torch"))


async def test_the_installed_memlane_mcp_answers_a_client(
    installed: Installed, tmp_path: Path
) -> None:
    server = StdioServerParameters(
        command=installed.memlane,
        args=["--home", str(tmp_path / "home"), "mcp", "--namespace", "install-test"],
        env={"PATH": installed.path, "HOME": str(tmp_path), "MEMLANE_EMBEDDING_BACKEND": "hashing"},
        cwd=str(tmp_path),
    )
    async with Client(server, read_timeout_seconds=60) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"memory_search", "memory_add", "session_get"} <= names
