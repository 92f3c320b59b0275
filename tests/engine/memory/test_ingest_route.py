"""Work kept with the route of the request that caused it runs there without that request.

A turn's queued memory work carries the request's route (`TurnInput.route`: upstream and
API, never its key). Run after the request is gone (no live route, as after a restart),
it still goes to that upstream, with the key configured for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from memlane.config import Settings
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.ingest import TurnInput, _recorded
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from memlane.text.llm import REQUEST_ROUTE, LLMRoute
from tests.proxy.test_messages_own_llm import own_calls, own_requests
from tests.support.anthropic_upstream import ScriptedAnthropic

CONFIGURED = "sk-ant-configured-0123456789"


@pytest.fixture
async def rt(
    settings: Settings, sqlite_store: SQLiteStore, anthropic_upstream: ScriptedAnthropic
) -> AsyncIterator[Runtime]:
    """A runtime whose own LLM is the factory's (the default: it follows requests)."""
    configured = settings.model_copy(
        update={
            "anthropic_upstream_url": anthropic_upstream.base,
            "anthropic_api_key": SecretStr(CONFIGURED),
            "upstream_url": "http://127.0.0.1:9/v1",  # nothing answers there
        }
    )
    runtime = Runtime(configured, sqlite_store)
    yield runtime
    await runtime.background.drain()
    await runtime.memory_book.stop_watching()


async def test_queued_work_follows_its_route_with_the_configured_key(
    rt: Runtime, anthropic_upstream: ScriptedAnthropic
) -> None:
    anthropic_upstream.respond_with(own_calls)
    route = LLMRoute("anthropic", anthropic_upstream.base)
    item = TurnInput(
        "s1", "home", "claude-sonnet-4-6", user_text="I just married Anne!", route=route
    )
    assert REQUEST_ROUTE.get() is None  # no live request
    await _recorded(rt, [item])

    facts = rt.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]
    extraction = next(
        r for r in own_requests(anthropic_upstream) if r.json["system"] == FACT_PROMPT
    )
    assert extraction.headers["x-api-key"] == CONFIGURED
    assert REQUEST_ROUTE.get() is None  # the route was the job's only
