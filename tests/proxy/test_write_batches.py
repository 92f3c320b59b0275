"""A session's turns are remembered in batches: one extraction call for several turns,
facts from every one of them, and what waits is remembered at shutdown."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.engine.runtime import Runtime
from memlane.store import open_store
from tests.proxy.conftest import sdk
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

QUIET_FOR_A_MINUTE: dict[str, Any] = {"memory_batch_quiet_seconds": 60, "index_enabled": False}
"""Only a full batch, `drain` or shutdown starts a batch: no timing in the test."""

PROMPTS = ["I live in Lyon", "My dog is called Rex", "I work on a compiler"]
FACTS = {
    "I live in Lyon": "The user lives in Lyon",
    "My dog is called Rex": "The user's dog is named Rex",
    "I work on a compiler": "The user works on a compiler",
}


def extraction_calls(upstream: ScriptedUpstream) -> list[RecordedRequest]:
    return [r for r in upstream.model_requests if r.messages[0].get("content") == FACT_PROMPT]


def answer_like_a_model(upstream: ScriptedUpstream) -> None:
    """Extraction: one fact per numbered user message in the call."""

    def answer(request: RecordedRequest) -> Reply | None:
        if request.messages[0].get("content") != FACT_PROMPT:
            return None
        body = str(request.messages[-1]["content"])
        found = []
        for number, text in re.findall(
            r"User message (\d+), written on [^\n]*\n<<<\n(.*?)\n>>>", body
        ):
            if text in FACTS:
                found.append({"message": int(number), "fact": FACTS[text]})
        return Reply(text=json.dumps(found))

    upstream.respond_with(answer)


def chat(
    proxy: Any, session: str, prompts: list[str], messages: list[dict[str, str]] | None = None
) -> list[dict[str, str]]:
    """The prompts as turns of `session` (after `messages`, its history so far): the history."""
    client = sdk(proxy, session)
    messages = [] if messages is None else messages
    for prompt in prompts:
        messages.append({"role": "user", "content": prompt})
        answer = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        messages.append({"role": "assistant", "content": answer.choices[0].message.content or ""})
    return messages


def memories(runtime: Runtime) -> dict[str, tuple[int | None, str | None]]:
    """Fact text -> (the message it came from, the session it was said in)."""
    return {
        f.text: (f.source_message, f.source_session)
        for f in runtime.store.list_facts(roles=("memory",))
    }


def test_three_turns_make_one_extraction_call_and_every_turn_gives_its_fact(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    answer_like_a_model(upstream)
    proxy = proxy_factory(**QUIET_FOR_A_MINUTE)
    chat(proxy, "batched", PROMPTS)
    assert extraction_calls(upstream) == []  # the session is not quiet yet: its turns wait
    proxy.drain()
    (call,) = extraction_calls(upstream)
    body = str(call.messages[-1]["content"])
    assert [body.index(p) for p in PROMPTS] == sorted(body.index(p) for p in PROMPTS)
    found = memories(proxy.runtime)
    assert set(found) == set(FACTS.values())
    session = proxy.store.find_session("batched")
    stored = {
        m.message.text: m.id
        for m in proxy.store.list_messages(session.id)
        if m.message.role == "user"
    }
    for prompt, fact in FACTS.items():  # each fact keeps the message it was said in
        assert found[fact] == (stored[prompt], session.id)
    turns = proxy.store.list_facts(roles=("user",))
    assert sorted(t.text for t in turns) == sorted(PROMPTS)


def test_a_full_batch_starts_without_waiting_for_quiet(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    answer_like_a_model(upstream)
    proxy = proxy_factory(memory_batch_turns=2, **QUIET_FOR_A_MINUTE)
    messages = chat(proxy, "full", PROMPTS[:2])
    deadline = time.monotonic() + 30
    while not extraction_calls(upstream) and time.monotonic() < deadline:
        time.sleep(0.05)  # turns 1-2 go as soon as two wait, the session never quiet
    chat(proxy, "full", PROMPTS[2:], messages)
    proxy.drain()
    calls = extraction_calls(upstream)
    assert len(calls) == 2  # turns 1-2 as soon as two waited, turn 3 at the drain
    assert "I live in Lyon" in str(calls[0].messages[-1]["content"])
    assert "My dog is called Rex" in str(calls[0].messages[-1]["content"])
    assert "I work on a compiler" in str(calls[1].messages[-1]["content"])
    assert set(memories(proxy.runtime)) == set(FACTS.values())


def test_turns_waiting_in_a_batch_are_remembered_at_shutdown(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    answer_like_a_model(upstream)
    proxy = proxy_factory(**QUIET_FOR_A_MINUTE)
    chat(proxy, "stopping", PROMPTS[:2])
    proxy.settled()  # both answers stored: both turns added to the session's batch
    assert proxy.runtime.background.batched == 2
    assert extraction_calls(upstream) == []
    proxy.stop()  # no drain: the proxy's own shutdown takes what waits
    assert len(extraction_calls(upstream)) == 1
    store = open_store(proxy.settings)
    try:
        texts = {f.text for f in store.list_facts(roles=("memory",))}
        assert texts == {"The user lives in Lyon", "The user's dog is named Rex"}
    finally:
        store.close()
