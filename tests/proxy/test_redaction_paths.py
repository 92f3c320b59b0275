"""No credential a user types reaches memlane's own LLM calls, its memory files, git or
a session's `meta.json`, whichever path the text takes (through the proxy, with an
upstream that writes back everything it is given)."""

from __future__ import annotations

import json

import openai

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.sessions.indexing import INDEX_PROMPT
from memlane.engine.sessions.metafile import meta_path
from memlane.engine.sessions.query import QUERY_PROMPT
from memlane.engine.sessions.working import SUMMARY_PROMPT as WORKING_SUMMARY_PROMPT
from memlane.text.llm import OWN_CALL_HEADER
from tests.support.gitrepo import every_object
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream, closing

SECRETS = {
    "DATABASE_PASSWORD=hunter2secret": "hunter2secret",
    "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789": "abcdefghijklmnopqrstuvwxyz0123",
    "client_secret: 8Q~wXyZ.abc123-DEF456_ghi": "8Q~wXyZ.abc123-DEF456_ghi",
    "PGPASSWORD=s3cr3tpw psql -h db": "s3cr3tpw",
    "AZURE_CLIENT_SECRET=abc~def123.xyzQRS": "abc~def123.xyzQRS",
    "curl -u admin:hunter22 https://ci.example.com": "hunter22",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==": "dXNlcjpwYXNzd29yZA==",
    "git clone https://bob:correcthorse@git.example.com/x.git": "correcthorse",
    "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc": "4eC39HqLyjWDarjtT1zdp7dc",
    "webhook https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX": "XXXXXXXX",
}
SAID = "Remember my deploy setup:\n" + "\n".join(SECRETS)


def echo(request: RecordedRequest) -> Reply | None:
    """A model that writes back all it was given: whatever reached it would be kept."""
    if OWN_CALL_HEADER not in request.headers:
        return None
    system = str(request.messages[0].get("content", "")) if request.messages else ""
    given = json.dumps(request.messages)
    if system == FACT_PROMPT:
        return Reply(text=json.dumps([f"The user's setup: {given}"]))
    if system == INDEX_PROMPT:
        meta = {"name": "deploy-setup", "description": given[:400], "summary": given, "tags": []}
        return Reply(text=json.dumps(meta))
    return Reply(text=given)


def client(url: str, session: str) -> openai.OpenAI:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": "home"}
    return closing(
        openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0, default_headers=headers)
    )


def test_no_credential_reaches_own_calls_files_git_or_meta(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_min_new_user_messages=1)
    upstream.respond_with(echo)
    upstream.script(Reply(text="Noted."))
    client(proxy.url, "setup").chat.completions.create(
        model="m", messages=[{"role": "user", "content": SAID}]
    )
    proxy.drain()
    upstream.script(Reply(text="Done."))
    client(proxy.url, "later").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "@@deploy-setup: which database?"}]
    )
    proxy.drain()
    proxy.call(proxy.runtime.memory_book.flush)  # the coalesced git commit, now

    own = [r for r in upstream.requests if OWN_CALL_HEADER in r.headers]
    asked = {str(r.messages[0].get("content")) for r in own}
    assert {FACT_PROMPT, INDEX_PROMPT, QUERY_PROMPT} <= asked  # extraction, index, question
    for request in own:
        for secret in SECRETS.values():
            assert secret.encode() not in request.body, (secret, request.messages[0])
    assert any(b"[redacted" in r.body for r in own)

    root = proxy.runtime.memory_book.files.root
    assert root is not None
    meta = meta_path(proxy.settings.sessions_path, "setup")
    assert "[redacted" in meta.read_text()
    written = [p for p in root.rglob("*") if p.is_file()] + [meta]
    for path in written:
        for secret in SECRETS.values():
            assert secret.encode() not in path.read_bytes(), (secret, path)
    objects = every_object(root)
    for secret in SECRETS.values():
        assert secret.encode() not in objects, secret
    stored = [f.text for f in proxy.store.list_facts(include_deleted=True)]
    assert stored
    assert not [t for t in stored for s in SECRETS.values() if s in t]


def own_bodies(upstream: ScriptedUpstream, marker: str) -> list[bytes]:
    """The bodies of memlane's own calls whose prompt contains `marker`."""
    return [
        r.body
        for r in upstream.requests
        if OWN_CALL_HEADER in r.headers and marker.encode() in r.body
    ]


def test_the_running_summary_call_carries_no_credential(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(
        memory_enabled=False, index_enabled=False, summary_enabled=True, summary_threshold=2,
        summary_keep_last=0,
    )  # fmt: skip
    upstream.respond_with(echo)
    said = client(proxy.url, "bot").with_options(default_headers={"X-Memlane-History": "server"})
    for text in (SAID, "and one more thing", "thanks"):
        said.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        proxy.drain()
    calls = own_bodies(upstream, WORKING_SUMMARY_PROMPT.split("\n", 1)[0])
    assert calls, "no running summary was asked for"
    for body in calls:
        for secret in SECRETS.values():
            assert secret.encode() not in body, secret


def test_the_compaction_summary_call_carries_no_credential(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(
        memory_enabled=False, index_enabled=False, scaffold_clients="all",
        governance_context_windows={"tiny": 4_096}, governance_safety_margin=256,
        governance_tool_output_limit=200, governance_protect_tokens=600,
        governance_summary_max_tokens=200,
    )  # fmt: skip
    upstream.respond_with(echo)
    upstream.script(Reply(text="ok"))
    filler = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} " + "lorem " * 250}
        for i in range(14)
    ]
    said = {"role": "user", "content": SAID}  # in the middle: what compaction summarises
    messages = [*filler[:6], said, *filler[6:]]
    messages.append({"role": "user", "content": "what next?"})
    client(proxy.url, "long").chat.completions.create(model="tiny", messages=messages)
    calls = own_bodies(upstream, "<removed_messages>")
    assert calls, "no compaction summary was asked for"
    for body in calls:
        for secret in SECRETS.values():
            assert secret.encode() not in body, secret
