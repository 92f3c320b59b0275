"""Through the proxy: a memory about a project file says so when the file changed since."""

from __future__ import annotations

import json
from pathlib import Path

import openai

from memlane.engine.memory.block import STALE_NOTE
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from tests.support.gitrepo import git, make_repo
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream, closing

FACT = "The service config lives in conf/app.toml"
OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)


def memlane_calls(request: RecordedRequest) -> Reply | None:
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        return Reply(text=json.dumps([FACT] if "app.toml" in user else []))
    if system in (RECONCILE_PROMPT, SUMMARY_PROMPT):
        return Reply(text="[]" if system == RECONCILE_PROMPT else "")
    return None


def client(url: str, session: str, repo: Path) -> openai.OpenAI:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": str(repo)}
    return closing(
        openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0, default_headers=headers)
    )


def recalled(upstream: ScriptedUpstream) -> str:
    forwarded = [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN]
    return "\n".join(str(m.get("content")) for m in forwarded[-1].messages)


def test_a_recalled_fact_says_its_file_changed_since_it_was_noted(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 8080\n"})
    noted = git(repo, "rev-parse", "HEAD")
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Noted."))
    said = "Remember: the service config lives in conf/app.toml"
    client(proxy.url, "one", repo).chat.completions.create(
        model="m", messages=[{"role": "user", "content": said}]
    )
    proxy.drain()
    [fact] = proxy.store.list_facts(scope=f"ns:{repo}", roles=("memory",))
    assert fact.cites is not None
    assert [(f.path, f.blob[:4]) for f in fact.cites.files] == [("conf/app.toml", "git:")]
    assert fact.cites.head == noted
    [turn] = proxy.store.list_facts(roles=("user",))  # the remembered turn cites it too
    assert turn.cites is not None
    assert turn.cites.files == fact.cites.files

    upstream.script(Reply(text="8080."))
    ask = [{"role": "user", "content": "Where is the service config (conf/app.toml)?"}]
    client(proxy.url, "two", repo).chat.completions.create(model="m", messages=ask)
    assert f"[memory] {FACT}" in recalled(upstream)  # unchanged: shown as it always was
    assert STALE_NOTE not in recalled(upstream)

    (repo / "conf" / "app.toml").write_text("port = 9090\n")
    git(repo, "commit", "-q", "-am", "new port")
    moved_on = git(repo, "rev-parse", "HEAD")
    upstream.script(Reply(text="Let me look."))
    client(proxy.url, "three", repo).chat.completions.create(model="m", messages=ask)
    day = fact.cites.noted_at.date().isoformat()
    line = (
        f"[memory, noted {day}; conf/app.toml has changed since "
        f"({noted[:7]}..{moved_on[:7]})] {FACT}"
    )
    assert line in recalled(upstream)
    assert STALE_NOTE in recalled(upstream)
    proxy.drain()
    three = proxy.store.find_session("three")
    (record,) = [e for e in proxy.store.list_events(three.id) if e.kind == "turn"]
    codes = {hit["ref"]: hit.get("code") for hit in record.payload["recalled"]}
    assert codes[fact.id] == "changed"  # the turn's record keeps what recall said
