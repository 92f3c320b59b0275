"""Namespaces inside one tenant: `@@` stays in its namespace unless configured, and a session
key that happens to equal a repo's name does not read that repo's memories."""

from __future__ import annotations

from typing import Any

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from memlane.engine.sessions.query import QUERY_PROMPT
from tests.engine.memory.test_through_proxy import memlane_calls
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream

OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT, QUERY_PROMPT)


def ask(proxy: RunningProxy, session: str, text: str, repo: str | None = None) -> str:
    client = sdk(proxy, session, **({"X-Memlane-Repo": repo} if repo is not None else {}))
    answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    return answer.choices[0].message.content or ""


def seeded(proxy: RunningProxy, key: str, repo: str, name: str) -> Any:
    session = proxy.store.ensure_session(key, namespace=repo)
    from memlane.store import NewMessage
    from memlane.types import Message

    proxy.store.append_messages(
        session.id, [NewMessage(Message("user", f"the {name} password is swordfish"), 5)]
    )
    return proxy.store.update_session(
        session.id, metadata={"name": name, "summary": f"the {name} password is swordfish"}
    )


def test_a_reference_to_another_namespace_is_answered_not_resolved(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    seeded(proxy, "payroll-1", "payroll", "payroll-db")
    for text in ("like @@payroll-db", "@@payroll-db: what is the password?", "see @@payroll-1"):
        answer = ask(proxy, "web-1", text, repo="website")
        assert "another namespace" in answer
        assert "MEMLANE_REFERENCES_ACROSS_NAMESPACES" in answer
        assert "swordfish" not in answer
    assert upstream.model_requests == []  # nothing forwarded, no query model asked
    # inside the namespace it resolves
    upstream.script(Reply(text="ok"))
    ask(proxy, "payroll-2", "like @@payroll-db", repo="payroll")
    assert "swordfish" in str(upstream.model_requests[-1].messages)


def test_references_across_namespaces_when_configured(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, references_across_namespaces=True)
    seeded(proxy, "payroll-1", "payroll", "payroll-db")
    upstream.script(Reply(text="ok"))
    ask(proxy, "web-1", "like @@payroll-db", repo="website")
    assert "swordfish" in str(upstream.model_requests[-1].messages)


def test_a_session_key_equal_to_a_repo_name_does_not_read_the_repos_facts(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    ask(proxy, "chat-a", "I just married Anne!", repo="home")
    proxy.drain()
    assert [f.text for f in proxy.store.list_facts(scope="ns:home", roles=("memory",))] == [
        "The user's wife is named Anne"
    ]
    upstream.script(Reply(text="No idea."), Reply(text="Anne."))
    ask(proxy, "home", "What is my wife's name?")  # its key is the repo's name, no repo header
    assert "Anne" not in _forwarded(upstream)
    assert proxy.store.find_session("home").namespace == "default"
    ask(proxy, "home-2", "What is my wife's name?", repo="home")  # in the namespace: recalled
    assert "Anne" in _forwarded(upstream)


def _forwarded(upstream: ScriptedUpstream) -> str:
    client = [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN]
    return str(client[-1].messages)


def test_a_reference_between_two_plain_sessions_with_no_repo_is_injected(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """Sessions that name no project share the tenant's `default` namespace: `@@` works."""
    proxy = proxy_factory(**QUIET)
    upstream.script(Reply(text="Noted."), Reply(text="heron-ci-8812."))
    ask(proxy, "monday-chat", "REMEMBER: the build server is called heron-ci-8812")
    monday = proxy.store.find_session("monday-chat")
    proxy.store.update_session(monday.id, metadata={"name": "build-notes"})
    ask(proxy, "tuesday-chat", "What did we call the build server in @@build-notes?")
    assert proxy.store.find_session("tuesday-chat").namespace == monday.namespace == "default"
    assert "heron-ci-8812" in str(upstream.model_requests[-1].messages)
    assert "another namespace" not in str(upstream.model_requests[-1].messages)
