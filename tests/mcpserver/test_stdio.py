"""`memlane mcp` spawned by the `mcp` SDK's own stdio client, as Claude Code or Codex start it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memlane.config import Settings
from memlane.engine import scaffold
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.query import QUERY_PROMPT
from memlane.store import open_store
from tests.mcpserver.conftest import MEMLANE, Home
from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_an_agent_over_stdio_uses_memory_and_sessions(
    home: Home, upstream: ScriptedUpstream
) -> None:
    def model(request: RecordedRequest) -> Reply | None:
        system = str(request.messages[0].get("content", ""))
        if system.startswith(RECONCILE_PROMPT[:40]):
            return Reply(text='[{"event": "ADD", "text": "Hotfixes skip the release train"}]')
        if system.startswith(QUERY_PROMPT[:40]):
            return Reply(text="PostgreSQL, for the orders service.")
        return None

    upstream.respond_with(model)
    server = StdioServerParameters(
        command=str(MEMLANE),
        args=["--home", str(home.path), "mcp", "--session", "agent-7"],
        env={
            "MEMLANE_UPSTREAM_URL": upstream.url,
            "MEMLANE_LLM_MODEL": "scripted-small",
            "MEMLANE_EMBEDDING_BACKEND": "hashing",
        },
        cwd=str(home.repo),  # the repository's path is the namespace
    )
    async with Client(server, read_timeout_seconds=60) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == [
            "memory_search",
            "memory_get",
            "memory_history",
            "memory_add",
            "memory_update",
            "memory_delete",
            "sessions_search",
            "session_get",
            "session_ask",
            "todo_get",
            "todo_set",
        ]
        added = await client.call_tool("memory_add", {"text": "Hotfixes skip the release train"})
        assert f"Remembered in ns:{home.namespace}" in text(added)
        asked = [str(r.json) for r in upstream.model_requests]
        assert any("The release train leaves on Thursdays" in a for a in asked)  # reconciled
        found = await client.call_tool("memory_search", {"q": "release train", "k": 5})
        assert "The release train leaves on Thursdays" in text(found)
        assert "Hotfixes skip the release train" in text(found)
        secret = await client.call_tool("memory_search", {"query": "Project Falcon secret"})
        assert "Falcon is secret" not in text(secret)

        sessions = await client.call_tool("sessions_search", {"query": "database"})
        assert "orders-database" in text(sessions)
        assert "falcon-database" not in text(sessions)
        page = await client.call_tool("session_get", {"ref": "orders-database"})
        assert "#1 assistant: We chose PostgreSQL for the orders service." in text(page)
        answer = await client.call_tool(
            "session_ask", {"ref": home.session_id[:8], "question": "Which database?"}
        )
        assert text(answer) == "PostgreSQL, for the orders service."
        assert "We chose PostgreSQL" in str(upstream.model_requests[-1].json)

        bad = await client.call_tool("session_get", {"ref": "orders-database", "limit": "all"})
        assert bad.is_error
        assert "`limit`" in text(bad)
        assert "It takes ref (string, required)" in text(bad)

        todo = await client.call_tool("todo_set", {"text": "- [ ] ship the hotfix"})
        assert not todo.is_error, text(todo)
        resource = await client.read_resource(
            f"memlane://memory/{quote('ns:' + home.namespace, safe='')}"
        )
        assert "Hotfixes skip the release train" in resource.contents[0].text  # type: ignore[union-attr]

    settings = Settings(home=home.path)
    store = open_store(settings)
    try:
        facts = store.list_facts(scope=f"ns:{home.namespace}")
        assert "Hotfixes skip the release train" in [f.text for f in facts]
        mine = store.find_session("agent-7")
        assert mine is not None
        assert (
            scaffold.read_texts(Runtime(settings, store), mine)["todo"] == "- [ ] ship the hotfix"
        )
    finally:
        store.close()
