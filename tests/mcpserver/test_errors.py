"""What the MCP server answers for something that is not there, driven in-process by the `mcp`
SDK's own client: a tool that finds nothing is a tool error (`isError`) saying what to do, and
a resource that cannot be read is a JSON-RPC error, never ordinary content."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import pytest
from mcp import Client, MCPError
from mcp_types import INVALID_PARAMS

from memlane.config import Settings
from memlane.engine.memory import manage
from memlane.engine.runtime import Runtime
from memlane.mcp.server import build_server
from memlane.store.sqlite import SQLiteStore
from memlane.views.tools import Binding

SHOP = Binding(namespace="shop")


@asynccontextmanager
async def connect(rt: Runtime, binding: Binding = SHOP) -> AsyncIterator[Client]:
    def bound(_headers: Mapping[str, str] | None) -> Binding:
        return binding

    async with Client(build_server(lambda: rt, bound), read_timeout_seconds=30) as client:
        yield client


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.fixture
def rt(settings: Settings, sqlite_store: SQLiteStore) -> Runtime:
    return Runtime(settings, sqlite_store)


async def test_memory_get_of_unknown_ids_only_is_a_tool_error_naming_them(rt: Runtime) -> None:
    async with connect(rt) as client:
        result = await client.call_tool("memory_get", {"ids": ["a1b2c3d4e5f6", "0f9e8d7c6b5a"]})
    assert result.is_error, text(result)
    assert "'a1b2c3d4e5f6'" in text(result)
    assert "'0f9e8d7c6b5a'" in text(result)
    assert "use memory_search to find current ids" in text(result)


async def test_memory_get_of_known_and_unknown_ids_answers_the_known_and_names_the_rest(
    rt: Runtime,
) -> None:
    kept = await manage.add_memory(rt, "The shop opens at nine", scope="ns:shop")
    theirs = await manage.add_memory(rt, "Project Falcon ships in March", scope="ns:other")
    async with connect(rt) as client:
        result = await client.call_tool("memory_get", {"ids": [kept.id, "a1b2c3d4e5f6", theirs.id]})
    assert not result.is_error, text(result)
    assert "text: The shop opens at nine" in text(result)
    assert f"No memory found for 'a1b2c3d4e5f6', '{theirs.id}'" in text(result)
    assert "Falcon" not in text(result)  # another namespace's is absent, not shown


async def test_every_tool_that_names_something_absent_answers_a_tool_error(rt: Runtime) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_history", {"id": "a1b2c3d4e5f6"}),
        ("memory_update", {"id": "a1b2c3d4e5f6", "text": "The shop opens at ten"}),
        ("memory_delete", {"id": "a1b2c3d4e5f6"}),
        ("session_get", {"ref": "no-such-session"}),
        ("session_ask", {"ref": "no-such-session", "question": "Which database?"}),
    ]
    async with connect(rt) as client:
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert result.is_error, f"{name}: {text(result)}"
            assert "search" in text(result), f"{name}: {text(result)}"  # says how to find one


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("memlane://session/no-such-session", "no session matches 'no-such-session'"),
        ("memlane://session/hidden", "no session matches 'hidden'"),  # another namespace's
        (f"memlane://memory/{quote('ns:other', safe='')}", "belongs to another namespace"),
        ("memlane://memory/everywhere-ish", "unknown scope 'everywhere-ish'"),
        ("memlane://nothing/here", "Unknown resource"),
    ],
)
async def test_a_resource_that_cannot_be_read_is_a_protocol_error(
    rt: Runtime, sqlite_store: SQLiteStore, uri: str, said: str
) -> None:
    sqlite_store.ensure_session("hidden", namespace="other")
    async with connect(rt) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource(uri)
        shown = await client.read_resource(f"memlane://memory/{quote('ns:shop', safe='')}")
    assert raised.value.code == INVALID_PARAMS
    assert said in raised.value.message
    assert shown.contents[0].text == "No memories in ns:shop."  # type: ignore[union-attr]
