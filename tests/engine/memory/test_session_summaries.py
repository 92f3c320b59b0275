"""The summaries session indexing writes are recalled in the namespace's other sessions.

End to end through the proxy: memlane's own index call (answered by the scripted
upstream) summarises a session; a request of another session of the same repo gets
that summary in its memory block; the session itself, another repo and another
tenant do not; a new summary replaces the old one, and deleting the session
removes it.
"""

from __future__ import annotations

import json

import httpx
import openai

from memlane.engine.sessions.indexing import INDEX_PROMPT
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    closing,
)

FIRST = "The job queue uses Postgres with SKIP LOCKED; retries back off to one hour."
SECOND = "The job queue moved to Redis streams; retries stay at one hour."
QUESTION = "Which locking does our job queue use?"


class IndexModel:
    """Answers memlane's session-index prompt with `summary`; other requests fall through."""

    def __init__(self) -> None:
        self.summary = FIRST

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if request.messages and request.messages[0].get("content") == INDEX_PROMPT:
            answer = {
                "name": "job-queue",
                "description": "Designing the job queue.",
                "summary": self.summary,
                "tags": ["queue"],
            }
            return Reply(text=json.dumps(answer))
        return None


def ask(
    proxy: RunningProxy, session: str, text: str, *, repo: str = "shop", key: str = "sk-x"
) -> None:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": repo}
    client = openai.OpenAI(base_url=proxy.url, api_key=key, max_retries=0, default_headers=headers)
    closing(client).chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    proxy.drain()


def recalled(upstream: ScriptedUpstream) -> str:
    """The memory block of the last request forwarded for a client ("" when none)."""
    forwarded = [r for r in upstream.model_requests if r.messages[0].get("content") != INDEX_PROMPT]
    messages = forwarded[-1].messages
    return str(messages[-2]["content"]) if len(messages) > 1 else ""


def index(proxy: RunningProxy, session: str) -> None:
    response = httpx.post(
        f"{proxy.base}/v1/memlane/sessions/{session}/index", json={}, headers=proxy.admin
    )
    assert response.status_code == 200, response.text


def test_another_session_of_the_repo_recalls_the_summary(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(memory_extract_facts=False, index_enabled=False)
    model = IndexModel()
    upstream.respond_with(model)
    ask(proxy, "design", "Let us design the job queue together.")
    index(proxy, "design")

    ask(proxy, "later", QUESTION)
    block = recalled(upstream)
    assert "[session summary, " in block
    assert FIRST in block

    ask(proxy, "design", QUESTION)  # the session itself: its own summary is not a memory
    assert FIRST not in recalled(upstream)
    ask(proxy, "elsewhere", QUESTION, repo="web")  # another repo never sees it
    assert FIRST not in recalled(upstream)

    model.summary = SECOND
    index(proxy, "design")
    ask(proxy, "later", QUESTION)
    block = recalled(upstream)
    assert SECOND in block
    assert FIRST not in block  # the summary was replaced, not added to

    (design,) = [s for s in proxy.store.list_sessions() if s.key == "design"]
    deleted = httpx.delete(f"{proxy.base}/v1/memlane/sessions/{design.id}", headers=proxy.admin)
    assert deleted.status_code == 200
    ask(proxy, "later", QUESTION)
    assert SECOND not in recalled(upstream)


def test_without_the_setting_no_summary_is_recalled(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(
        memory_extract_facts=False, index_enabled=False, memory_session_summaries=False
    )
    upstream.respond_with(IndexModel())
    ask(proxy, "design", "Let us design the job queue together.")
    index(proxy, "design")
    ask(proxy, "later", QUESTION)
    assert FIRST not in recalled(upstream)


def test_a_summary_stays_with_its_tenant(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(memory_extract_facts=False, index_enabled=False, tenancy="credential")
    upstream.respond_with(IndexModel())
    ask(proxy, "design", "Let us design the job queue together.", key="sk-alice")
    (design,) = proxy.store.list_sessions(tenant=None)
    index(proxy, design.id)
    ask(proxy, "later", QUESTION, key="sk-bob")  # the same repo name, another credential
    assert FIRST not in recalled(upstream)
    ask(proxy, "later", QUESTION, key="sk-alice")
    assert FIRST in recalled(upstream)
