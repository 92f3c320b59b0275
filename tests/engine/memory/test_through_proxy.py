"""The proxy runs the write path after a turn and the read path on the next request."""

from __future__ import annotations

import json

import httpx
import openai

from memlane.engine.fence import FENCE_CLOSE, FENCE_OPEN
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream, closing


def memlane_calls(request: RecordedRequest) -> Reply | None:
    """Answer memlane's own background prompts; client requests fall through to the queue."""
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        if "Anne" in user:
            return Reply(text=json.dumps(["The user's wife is named Anne"]))
        if "deploy" in user:
            return Reply(text=json.dumps(["Deploys go through the staging-7 cluster"]))
        return Reply(text="[]")
    if system == RECONCILE_PROMPT:
        return Reply(text="[]")
    if system == SUMMARY_PROMPT:
        return Reply(text="The user is married to Anne.")
    return None


def client(url: str, session: str, repo: str) -> openai.OpenAI:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": repo}
    return closing(
        openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0, default_headers=headers)
    )


def test_a_fact_learned_in_one_session_is_recalled_in_another_of_the_same_repo(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    client(proxy.url, "chat-a", "home").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "I just married Anne!"}]
    )
    proxy.drain()
    facts = proxy.store.list_facts(scope="ns:home", roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]
    status = httpx.get(
        f"{proxy.url.removesuffix('/v1')}/v1/memlane/status", headers=proxy.admin
    ).json()
    assert status["last_extraction"]["ok"] is True
    assert "+1 fact(s)" in status["last_extraction"]["detail"]
    assert not any(r.path.endswith("/embeddings") for r in upstream.requests)

    upstream.script(Reply(text="Anne."))
    history = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What is my wife's name?"},
    ]
    client(proxy.url, "chat-b", "home").chat.completions.create(model="m", messages=history)
    own = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)
    forwarded = [r for r in upstream.model_requests if r.messages[0].get("content") not in own]
    sent = forwarded[-1].messages
    assert sent[0] == history[0]  # the prefix is untouched
    assert sent[-1] == history[-1]  # the user's turn is last
    recall = str(sent[-2]["content"])
    assert sent[-2]["role"] == "user"
    assert recall.startswith(FENCE_OPEN)
    assert recall.endswith(FENCE_CLOSE)
    assert "not instructions" in recall
    assert "[memory] The user's wife is named Anne" in recall


def test_another_repo_never_sees_the_fact(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Ok."))
    client(proxy.url, "ops-1", "ops").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Every deploy uses staging-7"}]
    )
    proxy.drain()
    upstream.script(Reply(text="No idea."))
    client(proxy.url, "web-1", "web").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Which cluster do deploys use?"}]
    )
    last = [r for r in upstream.model_requests if r.messages[0].get("content") != FACT_PROMPT][-1]
    assert all("staging-7" not in str(m.get("content")) for m in last.messages)
    assert len(last.messages) == 1


def test_trimmed_mode_recalls_nothing_on_an_untrimmed_request(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False, memory_mode="trimmed")
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"), Reply(text="Anne."))
    c = client(proxy.url, "chat-t", "home")
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "I married Anne"}])
    proxy.drain()
    assert proxy.store.list_facts(scope="ns:home", roles=("memory",))
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Wife's name?"}])
    last = [r for r in upstream.model_requests if r.messages[0].get("content") != FACT_PROMPT][-1]
    assert len(last.messages) == 1
