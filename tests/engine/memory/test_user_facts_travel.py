"""Facts about the user follow them into every project; facts about a project stay in it.

Sessions of two projects (`X-Memlane-Repo` alpha and beta) go through the proxy. The
scripted extraction labels each fact `user` or `project` (FACT_PROMPT's `about`); the
user's fact is kept in the tenant's global scope and recalled in the forwarded request
of the other project's session, the project's fact only in its own project's sessions.
Reconciliation compares a user fact with the user's facts only, so a project's facts are
never updated by it.
"""

from __future__ import annotations

import json

import openai

from memlane.engine.memory import manage
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream, closing

OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)
TABS = "The user prefers tabs over spaces"
DEPLOY = "The project deploys to fly.io region ams"


def labelled(request: RecordedRequest) -> Reply | None:
    """memlane's own prompts: extraction labels the facts; everything else falls through."""
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        facts = []
        if "tabs" in user:
            facts.append({"message": 1, "fact": TABS, "about": "user"})
        if "fly.io" in user:
            facts.append({"message": 1, "fact": DEPLOY, "about": "project"})
        return Reply(text=json.dumps(facts))
    if system == RECONCILE_PROMPT:
        if "prefers spaces" in user.split("\nNEW ", 1)[0]:  # the user's old preference
            return Reply(text=json.dumps([{"event": "UPDATE", "id": "0", "text": TABS}]))
        return Reply(text="[]")
    if system == SUMMARY_PROMPT:
        return Reply(text="The user prefers tabs.")
    return None


def say(url: str, session: str, repo: str, text: str) -> None:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": repo}
    client = closing(
        openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0, default_headers=headers)
    )
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def forwarded(upstream: ScriptedUpstream) -> str:
    client = [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN]
    return str(client[-1].messages)


def test_a_user_fact_travels_to_another_project_and_a_project_fact_does_not(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(labelled)
    upstream.script(Reply(text="Noted."))
    say(proxy.url, "alpha-1", "alpha", "I always use tabs, and this repo deploys to fly.io ams")
    proxy.drain()
    memories = proxy.store.list_facts(roles=("memory",))
    assert {(f.scope, f.text) for f in memories} == {("global", TABS), ("ns:alpha", DEPLOY)}

    upstream.script(Reply(text="Tabs; no idea where it deploys."))
    say(proxy.url, "beta-1", "beta", "Remind me: tabs or spaces, and where do we deploy fly.io?")
    elsewhere = forwarded(upstream)
    assert TABS in elsewhere  # the user's preference followed them into beta
    assert DEPLOY not in elsewhere  # alpha's deploy target never reaches beta

    upstream.script(Reply(text="Tabs, and fly.io ams."))
    say(proxy.url, "alpha-2", "alpha", "Remind me: tabs or spaces, and where do we deploy fly.io?")
    home = forwarded(upstream)
    assert TABS in home
    assert DEPLOY in home


def test_a_user_fact_is_reconciled_with_the_users_facts_not_a_projects(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    rt = proxy.runtime
    old = proxy.call(
        lambda: manage.add_memory(rt, "The user prefers spaces over tabs", scope="global")
    )
    kept = proxy.call(
        lambda: manage.add_memory(rt, "The alpha repo indents with 2 spaces", scope="ns:alpha")
    )
    upstream.respond_with(labelled)
    upstream.script(Reply(text="Noted."))
    say(proxy.url, "alpha-3", "alpha", "These days I prefer tabs over spaces")
    proxy.drain()

    asked = [r for r in upstream.model_requests if r.messages[0].get("content") == RECONCILE_PROMPT]
    assert asked
    assert all("alpha repo" not in str(r.messages) for r in asked)
    store = proxy.store
    assert store.get_fact(kept.id).valid_to is None  # the project's fact is untouched
    replaced = store.get_fact(old.id)
    assert replaced.valid_to is not None
    assert replaced.replaced_by is not None
    assert store.get_fact(replaced.replaced_by).scope == "global"
    assert store.get_fact(replaced.replaced_by).text == TABS
