"""The MCP server at `/mcp` is built by its first request, not at start: a proxy that no
MCP client uses never imports the SDK (about a third of `memlane serve`'s start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.proxy.mcp_route import MCPRoute
from memlane.proxy.state import Access

PROBE = """
import json, sys
from starlette.testclient import TestClient
from memlane.config import Settings
from memlane.proxy.app import create_app

def loaded():
    return sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp."))[:3]

settings = Settings(home=sys.argv[1], admin_token="probe-admin-token", upstream_url="http://127.0.0.1:9/v1")
app = create_app(settings)
seen = {"at_create": loaded()}
hello = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "1"}},
}
headers = {"authorization": "Bearer probe-admin-token",
           "accept": "application/json, text/event-stream"}
for run in ("first", "second"):  # a second lifespan of the same app builds a new manager
    with TestClient(app, base_url="http://127.0.0.1:8100") as client:
        seen[run + "_health"] = client.get("/health").status_code
        seen[run + "_started"] = loaded()
        refused = client.post("/mcp", json=hello, headers={"accept": headers["accept"]})
        seen[run + "_refused"] = [refused.status_code, loaded()]
        opened = client.post("/mcp", json=hello, headers=headers)
        seen[run + "_mcp"] = [opened.status_code, opened.headers.get("mcp-session-id") is not None]
print(json.dumps(seen))
"""


def test_the_sdk_is_imported_by_the_first_mcp_request_and_serves_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["at_create"] == []
    assert seen["first_health"] == 200
    assert seen["first_started"] == []
    # a request without the token is refused before anything is built
    assert seen["first_refused"] == [401, []]
    assert seen["first_mcp"] == [200, True]
    assert seen["second_health"] == 200
    assert seen["second_mcp"] == [200, True]


async def test_a_request_that_comes_as_the_app_stops_is_told_to_send_it_again(
    tmp_path: Path,
) -> None:
    """No manager is started once the lifespan has ended: the request gets the 503 a
    graceful stop gives (its SDK sends it again), and nothing is built."""
    route = MCPRoute(
        Settings(home=tmp_path),
        runtime_of=lambda: pytest.fail("the runtime is not asked for"),
        access_of=lambda headers: Access(tenant=None),
    )
    async with route.running():
        pass
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    await route(scope, receive, send)
    assert sent[0]["status"] == 503
    error = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]
    assert error["code"] == "memlane_stopping"
    assert route._host is None
