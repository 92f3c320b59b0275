"""The MCP server at /mcp on a running `memlane serve` app, driven by the `mcp` SDK's own client
over streamable HTTP: the admin token, DNS-rebinding protection, namespaces from headers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from memlane.engine import scaffold, turn_store
from memlane.engine.memory import manage
from memlane.store import NewMessage
from memlane.types import Message
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream

QUIET: dict[str, Any] = {"memory_enabled": True, "index_enabled": False}


@asynccontextmanager
async def connect(proxy: RunningProxy, **headers: str) -> AsyncIterator[Client]:
    client = httpx2.AsyncClient(headers={**proxy.admin, **headers}, timeout=30)
    async with client, Client(streamable_http_client(f"{proxy.base}/mcp", http_client=client)) as c:
        yield c


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_a_client_over_http_adds_a_memory_and_finds_it(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    async with connect(proxy, **{"X-Memlane-Repo": "shop"}) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"memory_search", "memory_add", "session_get", "session_ask"} <= tools
        added = await client.call_tool("memory_add", {"text": "Deploys go out with make ship"})
        assert not added.is_error, text(added)
        assert "ns:shop" in text(added)
        found = await client.call_tool("memory_search", {"q": "deploys ship", "k": 3})
        assert not found.is_error
        assert "Deploys go out with make ship" in text(found)
    facts = proxy.store.list_facts(scope="ns:shop")
    assert [f.text for f in facts] == ["Deploys go out with make ship"]
    assert facts[0].conversation_id == "mcp"  # provenance: added through MCP


async def test_a_client_asks_what_was_true_then_and_how_it_changed(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    jan, mar = datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC)
    berlin = proxy.call(
        lambda: manage.add_memory(
            proxy.runtime, "The user lives in Berlin", scope="ns:me", valid_from=jan
        )
    )
    _, lisbon = proxy.call(
        lambda: manage.supersede_memory(
            proxy.runtime, berlin.id, "The user lives in Lisbon", at=mar
        )
    )
    async with connect(proxy, **{"X-Memlane-Repo": "me"}) as client:
        now = text(await client.call_tool("memory_search", {"query": "user lives"}))
        then = await client.call_tool(
            "memory_search", {"query": "user lives", "as_of": "2026-02-01"}
        )
        history = await client.call_tool("memory_history", {"id": lisbon.id})
    assert "Lisbon" in now
    assert "Berlin" not in now
    assert not then.is_error, text(then)
    assert "Berlin" in text(then)
    assert "Lisbon" not in text(then)
    assert not history.is_error, text(history)
    assert "[2026-01-15 → 2026-03-10, replaced] The user lives in Berlin" in text(history)
    assert "[since 2026-03-10, current] The user lives in Lisbon" in text(history)


async def test_namespaces_from_headers_never_see_each_other(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    async with connect(proxy, **{"X-Memlane-Repo": "alpha"}) as alpha:
        await alpha.call_tool("memory_add", {"text": "The alpha launch code is tangerine"})
    async with connect(proxy, **{"X-Memlane-Repo": "beta"}) as beta:
        found = await beta.call_tool("memory_search", {"query": "alpha launch code"})
        assert "tangerine" not in text(found)
        named = await beta.call_tool("memory_search", {"query": "launch", "scope": "ns:alpha"})
        assert named.is_error
        assert "another namespace" in text(named)
        fact = proxy.store.list_facts(scope="ns:alpha")[0]
        opened = await beta.call_tool("memory_get", {"ids": [fact.id]})
        assert "tangerine" not in text(opened)
        deleted = await beta.call_tool("memory_delete", {"id": fact.id})
        assert deleted.is_error
    assert not proxy.store.get_fact(fact.id).deleted


async def test_a_server_with_all_namespaces_answers_a_call_that_names_one(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(mcp_all_namespaces=True, **QUIET)
    async with connect(proxy, **{"X-Memlane-Repo": "alpha"}) as alpha:
        await alpha.call_tool("memory_add", {"text": "The alpha launch code is tangerine"})
    async with connect(proxy, **{"X-Memlane-Repo": "beta"}) as beta:
        unnamed = await beta.call_tool("memory_search", {"query": "alpha launch code"})
        assert "tangerine" not in text(unnamed)
        named = await beta.call_tool("memory_search", {"query": "launch", "scope": "ns:alpha"})
        assert "The alpha launch code is tangerine" in text(named)


def test_mcp_needs_the_admin_token(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    for sent in ({}, {"authorization": "Bearer wrong-token-wrong-token"}):
        answer = httpx.post(f"{proxy.base}/mcp", json=body, headers={**accept, **sent})
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "invalid_admin_token"


@pytest.mark.parametrize(
    ("header", "value"),
    [("host", "evil.example:8100"), ("origin", "http://evil.example")],
)
def test_a_rebinding_page_cannot_reach_mcp(
    proxy_factory: ProxyFactory, header: str, value: str
) -> None:
    proxy = proxy_factory(**QUIET)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**proxy.admin, "accept": "application/json, text/event-stream", header: value}
    answer = httpx.post(f"{proxy.base}/mcp", json=body, headers=headers)
    assert answer.status_code == 403


async def test_a_session_header_binds_its_namespace_and_opens_pages(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    store = proxy.store
    session = store.ensure_session("agent-9", namespace="shop")
    store.append_messages(
        session.id,
        [
            NewMessage(Message("user", "Rename the invoices table"), 1),
            NewMessage(Message("assistant", "Renamed it to billing_invoices."), 1),
        ],
    )
    other = store.ensure_session("elsewhere", namespace="other")
    async with connect(proxy, **{"X-Memlane-Session": "agent-9"}) as client:
        page = await client.call_tool("session_get", {"ref": "agent-9"})
        assert "#1 assistant: Renamed it to billing_invoices." in text(page)
        resource = await client.read_resource(f"memlane://session/{session.id}")
        assert "billing_invoices" in resource.contents[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="no session matches"):  # a JSON-RPC error
            await client.read_resource(f"memlane://session/{other.id}")
        added = await client.call_tool("memory_add", {"text": "Invoices live in billing_invoices"})
        assert "Remembered in ns:shop" in text(added)  # the session's namespace
        await client.call_tool("todo_set", {"text": "- [ ] migrate readers"})
    state = proxy.store.get_session(session.id)
    assert state is not None
    assert scaffold.read_texts(proxy.runtime, state)["todo"] == "- [ ] migrate readers"


@asynccontextmanager
async def connect_as(proxy: RunningProxy, key: str, **headers: str) -> AsyncIterator[Client]:
    """A client whose own key is its credential (credential tenancy), not the admin token."""
    client = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}", **headers}, timeout=30)
    async with client, Client(streamable_http_client(f"{proxy.base}/mcp", http_client=client)) as c:
        yield c


async def test_two_keys_never_see_each_others_memories_or_sessions(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(tenancy="credential", **QUIET)
    alice, bob = "sk-alice-0123456789abcdef", "sk-bob-0123456789abcdefgh"
    repo = {"X-Memlane-Repo": "shop", "X-Memlane-Session": "work"}
    async with connect_as(proxy, alice, **repo) as client:
        added = await client.call_tool("memory_add", {"text": "The safe code is persimmon"})
        assert not added.is_error, text(added)
        await client.call_tool("todo_set", {"text": "- [ ] alice's secret plan"})
    (fact,) = proxy.store.list_facts(roles=("memory",))
    assert fact.scope.startswith("t:")
    assert fact.scope.endswith(":ns:shop")
    (session,) = proxy.store.list_sessions(tenant=None)
    async with connect_as(proxy, bob, **repo) as client:  # same repo, same session key
        found = await client.call_tool("memory_search", {"query": "safe code"})
        assert "persimmon" not in text(found)
        opened = await client.call_tool("memory_get", {"ids": [fact.id]})
        assert "persimmon" not in text(opened)
        named = await client.call_tool("memory_search", {"query": "safe", "scope": fact.scope})
        assert named.is_error
        for ref in (session.id, session.id[:8], "work"):
            page = await client.call_tool("session_get", {"ref": ref})
            assert "alice" not in text(page)
        todo = await client.call_tool("todo_get", {})
        assert "alice" not in text(todo)
        assert (await client.call_tool("memory_delete", {"id": fact.id})).is_error
    assert not proxy.store.get_fact(fact.id).deleted
    async with connect_as(proxy, alice, **repo) as client:  # the owner still has all of it
        assert "persimmon" in text(await client.call_tool("memory_search", {"query": "safe"}))
    async with connect(proxy, **repo) as operator:  # the admin token: no tenant's data
        assert "persimmon" not in text(await operator.call_tool("memory_search", {"query": "safe"}))


def test_mcp_without_any_key_is_refused_under_credential_tenancy(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(tenancy="credential", **QUIET)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    answer = httpx.post(f"{proxy.base}/mcp", json=body, headers=accept)
    assert answer.status_code == 401


async def test_a_tool_reads_the_answer_a_proxied_client_was_just_given(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer is stored just after its client has it; an agent that asks its MCP tools
    about the session at once must find the answer there, as the admin API does."""
    proxy = proxy_factory(**QUIET)
    store_answer = turn_store.store_answer

    def slow_store_answer(*args: Any) -> None:
        time.sleep(0.5)
        store_answer(*args)

    monkeypatch.setattr(turn_store, "store_answer", slow_store_answer)
    upstream.script(Reply(text="The invoices table is now billing_invoices."))
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(
            f"{proxy.url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "rename invoices"}]},
            headers={"X-Memlane-Session": "agent-7", "X-Memlane-Repo": "shop"},
        )
    assert answer.status_code == 200
    async with connect(proxy, **{"X-Memlane-Session": "agent-7"}) as client:
        page = text(await client.call_tool("session_get", {"ref": "agent-7"}))
    assert "assistant: The invoices table is now billing_invoices." in page
