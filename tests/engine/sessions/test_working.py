"""Running summary, summarized_count, working context, LLM-failure fallback."""

from __future__ import annotations

from typing import Any

import pytest

from memlane.engine.runtime import Runtime
from memlane.engine.sessions.working import SUMMARY_EVENT, working_context
from memlane.store import NewMessage, SessionNotFound
from memlane.store.sqlite import SQLiteStore
from memlane.text.llm import LLMError
from memlane.types import Message, ToolCall
from tests.engine.sessions.conftest import chat
from tests.support.text import ScriptedLLM

TEXTS = [f"message {i}" for i in range(1, 9)]


async def test_disabled_returns_the_transcript_verbatim(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    session = chat(sqlite_store, "k", TEXTS)
    context = await working_context(rt, session.id)
    assert [m.text for m in context.messages] == TEXTS
    assert scripted_llm.calls == []


async def test_threshold_crossed_exactly(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(summary_enabled=True, summary_threshold=4, summary_keep_last=2)
    session = chat(sqlite_store, "k", TEXTS[:4])
    at_threshold = await working_context(rt, session.id)
    assert [m.text for m in at_threshold.messages] == TEXTS[:4]
    assert scripted_llm.calls == []

    sqlite_store.append_messages(session.id, [NewMessage(Message(role="user", text=TEXTS[4]), 1)])
    scripted_llm.push("They counted from one to three.")
    past = await working_context(rt, session.id)
    assert len(scripted_llm.calls) == 1
    prompt = scripted_llm.prompts[0]
    assert "message 1" in prompt
    assert "message 3" in prompt
    assert "message 4" not in prompt
    assert past.folded == 3
    assert past.summarized_count == 3
    assert past.messages[0].role == "system"
    assert past.messages[0].origin == "summary"
    assert "They counted from one to three." in past.messages[0].text
    assert [m.text for m in past.messages[1:]] == ["message 4", "message 5"]
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert stored.summary == "They counted from one to three."
    assert stored.summarized_count == 3
    events = sqlite_store.list_events(session.id, kind=SUMMARY_EVENT)
    assert events[-1].payload["success"] is True
    assert "usage" in events[-1].payload

    again = await working_context(rt, session.id)
    assert len(scripted_llm.calls) == 1  # nothing new to fold
    assert [m.text for m in again.messages] == [m.text for m in past.messages]


async def test_next_fold_extends_the_stored_summary(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(summary_enabled=True, summary_threshold=4, summary_keep_last=2)
    session = chat(sqlite_store, "k", TEXTS[:5])
    scripted_llm.push("first summary", "second summary")
    await working_context(rt, session.id)
    sqlite_store.append_messages(
        session.id, [NewMessage(Message(role="assistant", text=t), 1) for t in TEXTS[5:8]]
    )
    context = await working_context(rt, session.id)
    assert "Current summary:\nfirst summary" in scripted_llm.prompts[1]
    assert "message 4" in scripted_llm.prompts[1]
    assert "message 3" not in scripted_llm.prompts[1]
    assert context.summarized_count == 6
    assert [m.text for m in context.messages[1:]] == ["message 7", "message 8"]


async def test_llm_failure_keeps_the_summary_and_returns_the_full_transcript(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(summary_enabled=True, summary_threshold=4, summary_keep_last=2)
    session = chat(sqlite_store, "k", TEXTS)
    sqlite_store.update_session(session.id, summary="older summary", summarized_count=2)
    scripted_llm.push(LLMError("upstream down"))
    context = await working_context(rt, session.id)
    assert context.fallback == "upstream down"
    assert [m.text for m in context.messages] == TEXTS
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert (stored.summary, stored.summarized_count) == ("older summary", 2)
    failed = sqlite_store.list_events(session.id, kind=SUMMARY_EVENT)
    assert failed[-1].payload == {"success": False, "error": "upstream down"}


async def test_an_empty_summary_counts_as_a_failure(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(summary_enabled=True, summary_threshold=2, summary_keep_last=1)
    session = chat(sqlite_store, "k", TEXTS[:3])
    scripted_llm.push("   ")
    context = await working_context(rt, session.id)
    assert context.fallback is not None
    assert len(context.messages) == 3


async def test_only_prompts_and_answers_are_in_the_working_context(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(summary_enabled=True, summary_threshold=40)
    session = chat(sqlite_store, "k", ["do it"])
    sqlite_store.append_messages(
        session.id,
        [
            NewMessage(
                Message(role="assistant", kind="tool_call", tool_calls=(ToolCall("c1", "ls"),)), 1
            ),
            NewMessage(Message(role="tool", kind="tool_result", text="a b c", call_id="c1"), 1),
            NewMessage(Message(role="assistant", text="done"), 1),
        ],
    )
    context = await working_context(rt, session.id)
    assert [m.text for m in context.messages] == ["do it", "done"]


async def test_dedicated_summary_model_is_used(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt = make_rt(
        summary_enabled=True, summary_threshold=2, summary_keep_last=1, summary_model="cheap"
    )
    session = chat(sqlite_store, "k", TEXTS[:3])
    scripted_llm.push("s")
    await working_context(rt, session.id, model="big")
    assert scripted_llm.calls[0].model == "cheap"


async def test_unknown_session(rt: Runtime) -> None:
    with pytest.raises(SessionNotFound, match="memlane sessions list"):
        await working_context(rt, "nope")


async def test_dedicated_summary_endpoint_gets_the_call(
    settings: Any, sqlite_store: SQLiteStore, upstream: Any, tokenizer: Any
) -> None:
    from tests.support.upstream import Reply

    rt = Runtime(
        settings.model_copy(
            update={
                "summary_enabled": True,
                "summary_threshold": 2,
                "summary_keep_last": 1,
                "upstream_url": "http://127.0.0.1:9/v1",  # nothing listens: must not be used
                "summary_base_url": upstream.url,
                "summary_model": "cheap-summary",
            }
        ),
        sqlite_store,
        _tokenizer=tokenizer,
    )
    session = chat(sqlite_store, "k", TEXTS[:3])
    upstream.script(Reply(text="a real summary"))
    context = await working_context(rt, session.id)
    assert context.summary == "a real summary"
    assert upstream.last.json["model"] == "cheap-summary"


async def test_a_session_is_found_by_the_key_a_person_knows(
    rt: Runtime, sqlite_store: SQLiteStore
) -> None:
    session = chat(sqlite_store, "queue-work", TEXTS)
    by_key = await working_context(rt, "queue-work")
    by_prefix = await working_context(rt, session.id[:8])
    assert [m.text for m in by_key.messages] == TEXTS
    assert [m.text for m in by_prefix.messages] == TEXTS
