"""A fact links to the remembered turn it was extracted from, and recall brings that turn.

End to end through the proxy: the client's turn is stored, memlane's own extraction
call (answered by the scripted upstream) writes the fact with its link, and a later
request that recalls the fact gets the turn beside it. The link lives in the store
and in the fact's Markdown file; it survives a rebuild of the index from the files,
stays inside the scopes a request may recall from, and goes when the fact or its
session is deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai

from memlane.engine.memory import scopes
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.manage import forget_memory
from memlane.engine.memory.recall import recall
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from memlane.types import Fact
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    closing,
)

SAID = "I just married Anne! The ceremony was at the lighthouse above the harbour."
FACT = "The user's wife is named Anne"
QUESTION = "What is my wife's name?"
OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)


def memlane_calls(request: RecordedRequest) -> Reply | None:
    """memlane's own background prompts; client requests fall through to the queue."""
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        return Reply(text=json.dumps([FACT] if "Anne" in user else []))
    if system == RECONCILE_PROMPT:
        return Reply(text="[]")
    if system == SUMMARY_PROMPT:
        return Reply(text="The user married Anne.")
    return None


def ask(proxy: RunningProxy, session: str, text: str, *, repo: str = "home") -> None:
    headers = {"X-Memlane-Session": session, "X-Memlane-Repo": repo}
    client = openai.OpenAI(
        base_url=proxy.url, api_key="sk-x", max_retries=0, default_headers=headers
    )
    closing(client).chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def recalled(upstream: ScriptedUpstream) -> str:
    """The memory block of the last request forwarded for a client ("" when none)."""
    forwarded = [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN]
    messages = forwarded[-1].messages
    return str(messages[-2]["content"]) if len(messages) > 1 else ""


def learned(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, **settings: object
) -> RunningProxy:
    """A proxy whose session `chat-a` (repo `home`) said SAID, and the fact it taught."""
    proxy = proxy_factory(index_enabled=False, memory_entity_expansion=False, **settings)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Congratulations!"))
    ask(proxy, "chat-a", SAID)
    proxy.drain()
    return proxy


def the_fact(store: SQLiteStore) -> Fact:
    (fact,) = store.list_facts(roles=("memory",))
    return fact


def the_turn(store: SQLiteStore) -> Fact:
    (turn,) = [t for t in store.list_facts(roles=("user",)) if t.text == SAID]
    return turn


def test_the_fact_records_its_turn_in_the_store_and_in_its_file(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    fact, turn = the_fact(proxy.store), the_turn(proxy.store)
    assert fact.text == FACT
    assert fact.source_turns == (turn.id,)
    assert turn.source_turns == ()  # a turn links nothing
    (path,) = Path(proxy.settings.memory_path).rglob(f"*__{fact.id}.md")
    assert f"source_turns:\n- {turn.id}\n" in path.read_text()


def test_a_recalled_fact_brings_the_turn_it_came_from(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    turn = the_turn(proxy.store)
    upstream.script(Reply(text="Anne."))
    ask(proxy, "chat-a", QUESTION)  # the same conversation, its first turn no longer sent
    block = recalled(upstream)
    lines = block.splitlines()
    assert f"[memory] {FACT}" in lines
    at = lines.index(f"[memory] {FACT}")
    assert lines[at + 1].startswith("[user, ")
    assert lines[at + 1].endswith(SAID)
    assert block.count(SAID) == 1  # once, though its own words matched too
    rt: Runtime = proxy.runtime
    found = proxy.call(
        lambda: recall(rt, QUESTION, scopes=[turn.scope, the_fact(proxy.store).scope])
    )
    at = [r.candidate.ref for r in found].index(the_fact(proxy.store).id)
    assert found[at + 1].candidate.ref == turn.id
    assert found[at + 1].candidate.score == found[at].candidate.score  # ranked with its fact


def test_without_the_setting_the_fact_comes_alone(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream, memory_fact_sources=False)
    assert the_fact(proxy.store).source_turns  # still recorded
    upstream.script(Reply(text="Anne."))
    ask(proxy, "chat-a", QUESTION)
    block = recalled(upstream)
    assert f"[memory] {FACT}" in block
    assert SAID not in block


def test_the_turn_stays_in_its_conversation_and_tenant(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    upstream.script(Reply(text="Anne."), Reply(text="No idea."))
    ask(proxy, "chat-b", QUESTION)  # same repo: the namespace's fact, not chat-a's turn
    block = recalled(upstream)
    assert f"[memory] {FACT}" in block
    assert SAID not in block
    ask(proxy, "web-1", QUESTION, repo="web")  # another namespace: nothing of either
    assert recalled(upstream) == ""

    rt: Runtime = proxy.runtime
    everywhere = [r.text for r in proxy.call(lambda: recall(rt, QUESTION, scopes=None))]
    assert everywhere[everywhere.index(FACT) + 1] == SAID  # the operator sees every scope
    tenant = "0" * 32
    other = scopes.recall_scopes(rt.settings, None, "home", tenant)  # another tenant, same repo
    assert proxy.call(lambda: recall(rt, QUESTION, scopes=other)) == []


def test_the_link_survives_rebuilding_the_index_from_the_files(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    fact, turn = the_fact(proxy.store), the_turn(proxy.store)
    home = Path(proxy.settings.home_path)
    proxy.stop()
    proxy.runtime.close()
    (home / "memlane.db").unlink()  # the index is derived: rebuild it from the files
    for suffix in ("-wal", "-shm"):
        (home / f"memlane.db{suffix}").unlink(missing_ok=True)
    (Path(proxy.settings.memory_path) / ".snapshot.json").unlink(missing_ok=True)
    rebuilt = proxy_factory(home=home, index_enabled=False, memory_entity_expansion=False)
    rebuilt.call(lambda: rebuilt.runtime.memory_book.sync_files())
    assert rebuilt.store.get_fact(fact.id).source_turns == (turn.id,)
    rebuilt.store.reindex_turns()  # `memlane memory reindex` does both
    assert rebuilt.store.get_fact(fact.id).source_turns == (turn.id,)
    rt: Runtime = rebuilt.runtime
    found = rebuilt.call(lambda: recall(rt, QUESTION, scopes=[turn.scope, fact.scope]))
    assert [r.text for r in found][:2] == [FACT, SAID]


def test_a_deleted_fact_links_nothing(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    fact = the_fact(proxy.store)
    rt: Runtime = proxy.runtime
    proxy.call(lambda: forget_memory(rt, fact.id))
    tomb = proxy.store.get_fact(fact.id)
    assert tomb.deleted
    assert tomb.source_turns == ()
    (path,) = Path(proxy.settings.memory_path).rglob(f"*__{fact.id}.md")
    assert "deleted" in path.parts
    assert "source_turns" not in path.read_text()
    proxy.call(lambda: forget_memory(rt, fact.id, purge=True))
    assert proxy.store.get_fact(fact.id) is None
    assert not list(Path(proxy.settings.memory_path).rglob(f"*__{fact.id}.md"))


def test_deleting_the_session_leaves_neither_the_fact_nor_its_turn(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = learned(proxy_factory, upstream)
    fact, turn = the_fact(proxy.store), the_turn(proxy.store)
    (session,) = [s for s in proxy.store.list_sessions() if s.key == "chat-a"]
    response = httpx.delete(f"{proxy.base}/v1/memlane/sessions/{session.id}", headers=proxy.admin)
    assert response.status_code == 200
    assert proxy.store.get_fact(fact.id) is None
    assert proxy.store.get_fact(turn.id) is None
    memory = Path(proxy.settings.memory_path)
    assert not any(fact.id in p.name or turn.id in p.name for p in memory.rglob("*.md"))
    upstream.script(Reply(text="No idea."))
    ask(proxy, "chat-b", QUESTION)
    assert recalled(upstream) == ""
