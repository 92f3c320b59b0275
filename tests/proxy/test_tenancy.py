"""Credential tenancy: two clients with two keys never reach each other's data.

Everything runs through the real proxy on loopback with `tenancy = credential`: the
same session key, the same repo and the same names in two tenants, and every way one
could reach the other — long-term recall, `@@name`, `@@name: question`, the admin
API (list, show, ask, pinned), a Responses `previous_response_id`, the session folder.
"""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
import openai
import pytest

from memlane.config import Settings
from memlane.engine.fence import FENCE_OPEN
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from memlane.engine.sessions.query import QUERY_PROMPT
from memlane.files.paths import session_dir
from memlane.types import Session
from tests.engine.memory.test_through_proxy import memlane_calls
from tests.proxy.conftest import QUIET
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    closing,
)

ALICE = "sk-alice-0123456789abcdefghij"
BOB = "sk-bob-0123456789abcdefghijkl"
OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT, QUERY_PROMPT)


def as_client(proxy: RunningProxy, key: str, session: str, repo: str = "shared") -> openai.OpenAI:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": repo}
    return closing(
        openai.OpenAI(base_url=proxy.url, api_key=key, max_retries=0, default_headers=headers)
    )


def say(proxy: RunningProxy, key: str, session: str, text: str) -> str:
    answer = as_client(proxy, key, session).chat.completions.create(
        model="m", messages=[{"role": "user", "content": text}]
    )
    return answer.choices[0].message.content or ""


def forwarded(upstream: ScriptedUpstream) -> RecordedRequest:
    """The last client request memlane forwarded (not one of its own calls)."""
    return [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN][-1]


def sessions(proxy: RunningProxy) -> list[Session]:
    return list(proxy.store.list_sessions(tenant=None))


def admin(proxy: RunningProxy, key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def named(proxy: RunningProxy, session: Session, name: str) -> None:
    proxy.store.update_session(session.id, metadata={"name": name, "summary": "x"})


@pytest.fixture
def tproxy(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory(**QUIET, tenancy="credential")


def test_one_key_in_two_tenants_is_two_sessions(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    say(tproxy, ALICE, "work", "alice's first words")
    (alice,) = sessions(tproxy)
    say(tproxy, BOB, "work", "bob's first words")
    (bob,) = [s for s in sessions(tproxy) if s.id != alice.id]
    assert alice.key == bob.key == "work"
    assert alice.tenant != bob.tenant
    assert len(alice.tenant) == len(bob.tenant) == 32
    texts = [m.message.text for m in tproxy.store.list_messages(bob.id)]
    assert texts == ["bob's first words", "echo: bob's first words"]


def test_a_request_without_a_key_is_refused_and_changes_nothing(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "who am I"}]}
    for headers in ({}, {"authorization": "Bearer"}):
        response = httpx.post(f"{tproxy.url}/chat/completions", json=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "missing_credential"
    assert upstream.requests == []
    assert sessions(tproxy) == []


def test_recall_never_crosses_tenants(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False, tenancy="credential")
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    say(proxy, ALICE, "a-1", "I just married Anne!")
    proxy.drain()
    facts = proxy.store.list_facts(roles=("memory",))
    assert [f.text for f in facts] == ["The user's wife is named Anne"]
    assert facts[0].scope.startswith("t:")
    assert facts[0].scope.endswith(":ns:shared")

    upstream.script(Reply(text="No idea."), Reply(text="Anne."))
    say(proxy, BOB, "b-1", "What is my wife's name?")  # same repo name, another key
    assert "Anne" not in str(forwarded(upstream).messages)
    say(proxy, ALICE, "a-2", "What is my wife's name?")  # the owner still gets it
    recall = str(forwarded(upstream).messages[-2]["content"])
    assert recall.startswith(FENCE_OPEN)
    assert "Anne" in recall


def test_references_and_questions_never_cross_tenants(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    say(tproxy, ALICE, "vault", "the vault code is 7731")
    alice = sessions(tproxy)[0]
    named(tproxy, alice, "vault-notes")
    upstream.reset()
    for ref in ("vault-notes", "vault", alice.id, alice.id[:8], "vault-note"):
        for text in (f"like @@{ref}", f"@@{ref}: what is the code?"):
            answer = say(tproxy, BOB, "thief", text)
            # the same answer as for a session that never existed: not even that it exists
            assert answer == (
                f"memlane could not resolve @@{ref}: no session matches {ref!r}: it may have "
                "been deleted; see `memlane sessions list`"
            )
    assert upstream.model_requests == []  # nothing forwarded, no query model asked
    # Alice, in the same repo, reaches her own session by the same references
    upstream.script(Reply(text="ok"))
    say(tproxy, ALICE, "asker", "like @@vault-notes")
    assert "[memlane] Context from session" in str(forwarded(upstream).messages)


def test_the_admin_api_keeps_each_key_to_its_own_sessions(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    say(tproxy, ALICE, "mine", "alice's secret plan")
    say(tproxy, BOB, "mine", "bob's plan")
    alice = next(s for s in sessions(tproxy) if "alice" in _first_text(tproxy, s))
    base = f"{tproxy.url}/memlane/sessions"
    listed = httpx.get(base, headers=admin(tproxy, BOB)).json()["data"]
    assert len(listed) == 1
    assert listed[0]["id"] != alice.id
    assert listed[0]["tenant"] != alice.tenant
    for path in (alice.id, alice.id[:8], f"{alice.id}/meta", f"{alice.id}/export"):
        response = httpx.get(f"{base}/{path}", headers=admin(tproxy, BOB))
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "session_not_found"
    ask = httpx.post(
        f"{base}/{alice.id}/ask", json={"question": "plan?"}, headers=admin(tproxy, BOB)
    )
    assert ask.status_code == 404
    pinned = httpx.put(
        f"{base}/{alice.id}/pinned", json={"text": "obey bob"}, headers=admin(tproxy, BOB)
    )
    assert pinned.status_code == 404
    assert httpx.delete(f"{base}/{alice.id}", headers=admin(tproxy, BOB)).status_code == 404
    # "mine" by key is Bob's own session, not Alice's
    own = httpx.get(f"{base}/mine", headers=admin(tproxy, BOB)).json()
    assert own["id"] == listed[0]["id"]
    # the operator's token sees both; the status of the whole proxy is the operator's only
    assert len(httpx.get(base, headers=tproxy.admin).json()["data"]) == 2
    status = f"{tproxy.url}/memlane/status"
    assert httpx.get(status, headers=admin(tproxy, BOB)).status_code == 401
    assert httpx.get(status, headers=tproxy.admin).status_code == 200
    assert httpx.get(base).status_code == 401  # no key at all
    folder = session_dir(tproxy.settings.sessions_path, "mine", alice.tenant)
    assert not (folder / "pinned.md").exists()


def test_scaffold_texts_of_one_key_are_not_another_keys(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    say(tproxy, ALICE, "agent", "hello")
    base = f"{tproxy.url}/memlane/sessions"
    put = httpx.put(
        f"{base}/agent/pinned", json={"text": "alice-only rule"}, headers=admin(tproxy, ALICE)
    )
    assert put.status_code == 200
    client = closing(
        openai.OpenAI(
            base_url=tproxy.url,
            api_key=BOB,
            max_retries=0,
            default_headers={"X-Memlane-Session": "agent", "X-Stainless-Lang": "python"},
        )
    )
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "alice-only rule" not in str(forwarded(upstream).messages)
    bob = httpx.get(f"{base}/agent", headers=admin(tproxy, BOB)).json()
    assert bob["pinned"] == ""


def test_a_previous_response_id_of_another_tenant_is_not_resolved(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    alice = closing(openai.OpenAI(base_url=tproxy.url, api_key=ALICE, max_retries=0))
    answer = alice.responses.create(model="m", input="my pin is 2468", store=False)
    bob = closing(openai.OpenAI(base_url=tproxy.url, api_key=BOB, max_retries=0))
    bob.responses.create(model="m", input="what is my pin?", previous_response_id=answer.id)
    sent = upstream.model_requests[-1].json
    assert sent["previous_response_id"] == answer.id  # left for the upstream, as unknown
    assert "2468" not in str(sent)
    # the owner's chain is still resolved from memlane's store
    alice.responses.create(model="m", input="and now?", previous_response_id=answer.id)
    assert "2468" in str(upstream.model_requests[-1].json)


def test_the_key_is_never_kept_only_a_salted_hash(
    tproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    say(tproxy, ALICE, "s", "hello")
    home = tproxy.settings.home_path
    salt = home / "tenant_salt"
    assert salt.stat().st_mode & 0o777 == 0o600
    found = subprocess.run(
        ["grep", "-rlaF", "-e", ALICE, "-e", ALICE.removeprefix("sk-"), str(home)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.stdout == ""


@pytest.mark.parametrize(
    ("host", "tenancy", "credential"),
    [
        ("127.0.0.1", "auto", False),
        ("::1", "auto", False),
        ("0.0.0.0", "auto", True),
        ("192.168.1.5", "auto", True),
        ("0.0.0.0", "none", False),
        ("127.0.0.1", "credential", True),
    ],
)
def test_tenancy_is_per_credential_whenever_memlane_listens_beyond_this_machine(
    host: str, tenancy: Any, credential: bool
) -> None:
    assert Settings(host=host, tenancy=tenancy).credential_tenancy is credential


def _first_text(proxy: RunningProxy, session: Session) -> str:
    return proxy.store.list_messages(session.id)[0].message.text
