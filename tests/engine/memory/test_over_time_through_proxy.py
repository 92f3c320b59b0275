"""Facts over time through the running proxy: a move replaces a fact, dated by the message
that said it; the next request recalls what is true now, or, asked about change, both."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai

from memlane.engine.memory import manage
from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.memory.reconcile import RECONCILE_PROMPT
from memlane.engine.memory.summary import SUMMARY_PROMPT
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    closing,
)

BERLIN = "The user lives in Berlin"
LISBON = "The user lives in Lisbon"
OWN = (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT)


def memlane_calls(request: RecordedRequest) -> Reply | None:
    """Answer memlane's own prompts: extraction, reconciliation (a move is an UPDATE)."""
    system = request.messages[0].get("content") if request.messages else None
    user = str(request.messages[-1].get("content", "")) if request.messages else ""
    if system == FACT_PROMPT:
        if "live in Berlin" in user:
            return Reply(text=json.dumps([BERLIN]))
        if "moved to Lisbon" in user:
            return Reply(text=json.dumps([LISBON]))
        return Reply(text="[]")
    if system == RECONCILE_PROMPT:
        if BERLIN in user and LISBON in user:
            return Reply(text=json.dumps([{"event": "UPDATE", "id": "0", "text": LISBON}]))
        return Reply(text="[]")
    if system == SUMMARY_PROMPT:
        return Reply(text="Where the user lives.")
    return None


def chat(url: str, session: str) -> Callable[[str], None]:
    """A client of one conversation: each call sends the whole history, as clients do."""
    client = closing(
        openai.OpenAI(
            base_url=url,
            api_key="sk-x",
            max_retries=0,
            default_headers={"X-Memlane-Session": session, "X-Memlane-Repo": "home"},
        )
    )
    history: list[Any] = []

    def ask(text: str) -> None:
        history.append({"role": "user", "content": text})
        answer = client.chat.completions.create(model="m", messages=history)
        history.append({"role": "assistant", "content": answer.choices[0].message.content})

    return ask


def test_a_move_closes_the_old_fact_at_the_message_and_recall_follows_time(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(index_enabled=False)
    upstream.respond_with(memlane_calls)
    upstream.script(Reply(text="Nice."), Reply(text="Congrats!"))
    first = chat(proxy.url, "chat-a")
    first("I live in Berlin")
    proxy.drain()
    first("I moved to Lisbon")
    proxy.drain()

    session = proxy.store.find_session("chat-a")
    said = {m.message.text: m for m in proxy.store.list_messages(session.id)}
    facts = {f.text: f for f in proxy.store.list_facts(scope="ns:home", roles=("memory",))}
    berlin, lisbon = facts[BERLIN], facts[LISBON]
    moved = said["I moved to Lisbon"]
    # true from the message that said it (not from when it was processed), closed by the next
    assert berlin.valid_from == said["I live in Berlin"].created_at
    assert berlin.valid_to == lisbon.valid_from == moved.created_at
    assert (berlin.replaced_by, lisbon.supersedes) == (lisbon.id, berlin.id)

    versions = proxy.call(lambda: manage.memory_versions(proxy.runtime, lisbon.id))
    assert [(v.fact.text, v.cause.message.text if v.cause else None) for v in versions] == [
        (BERLIN, "I live in Berlin"),
        (LISBON, "I moved to Lisbon"),
    ]

    upstream.script(Reply(text="Lisbon."), Reply(text="Berlin, then Lisbon."))
    second = chat(proxy.url, "chat-b")
    second("Which city is the user living in?")
    second("Which city was the user living in before?")
    forwarded = [r for r in upstream.model_requests if r.messages[0].get("content") not in OWN]
    now, change = (str(r.messages[-2]["content"]) for r in forwarded[-2:])
    assert f"[memory] {LISBON}" in now
    assert BERLIN not in now
    since = f"{moved.created_at:%Y-%m-%d}"
    assert f"[memory, since {since}] {LISBON}" in change
    assert f"→ {since}, replaced] {BERLIN}" in change
