"""Governance as the pipeline stage, on the real SQLite store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memlane.config import Settings
from memlane.engine import storing
from memlane.engine.governance import ContextOverflow, govern_turn
from memlane.engine.governance.ledger import (
    EVENT_DROPPED,
    EVENT_OFFLOADED,
    PLAN_STATE,
)
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import made_session
from memlane.engine.turn import Turn
from memlane.files.paths import session_dir
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message
from tests.engine.governance.helpers import MODEL, Builder, agentic, noise, settings_for
from tests.support.held_writes import held_writes
from tests.support.text import ScriptedLLM

SNAPSHOT = "<state_snapshot>goal: set up the project</state_snapshot>"


def runtime(tmp_path: Path, store: SQLiteStore, llm: ScriptedLLM, **overrides: object) -> Runtime:
    return Runtime(settings_for(tmp_path, **overrides), store, _llm=llm)


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def turn_for(rt: Runtime, messages: list[Message], key: str = "s1") -> Turn:
    session = rt.store.ensure_session(key)
    return Turn(
        key=key, namespace=key, model=MODEL, wire="chat", messages=messages, session=session
    )


async def test_offloaded_outputs_are_files_and_events_of_the_session(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM(default=SNAPSHOT))
    b = agentic("chat", 60)
    turn = turn_for(rt, b.messages)
    out = await govern_turn(rt, turn, turn.messages)
    assert turn.trimmed
    session_id = turn.session.id if turn.session else ""
    events = sqlite_store.list_events(session_id, kind=EVENT_OFFLOADED)
    assert events
    folder = session_dir(rt.settings.sessions_path, "s1") / "tool-outputs"
    for event in events:
        path = Path(event.payload["path"])
        assert path.parent == folder
        original = b.messages[event.payload["index"]]
        assert read(path) == original.text
    masked = [m for m in out if m.text.startswith("[memlane: tool output trimmed")]
    relative = folder.relative_to(rt.settings.home_path).as_posix()
    # the model sees where the output is from the home on, never the user's home path
    assert all(f"$MEMLANE_HOME/{relative}/" in m.text for m in masked)
    assert not any(str(rt.settings.home_path) in m.text for m in masked)
    dropped = sqlite_store.list_events(session_id, kind=EVENT_DROPPED)
    assert any("Next task number 4" in e.text for e in dropped)
    assert PLAN_STATE in sqlite_store.get_state(session_id)


async def test_the_plan_persists_so_the_next_request_needs_no_llm(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    llm = ScriptedLLM([SNAPSHOT])
    rt = runtime(tmp_path, sqlite_store, llm)
    b = agentic("chat", 60)
    first = await govern_turn(rt, turn_for(rt, b.messages), b.messages)
    b.user("and one more thing")
    rt2 = runtime(tmp_path, sqlite_store, llm)  # a restarted proxy
    second = await govern_turn(rt2, turn_for(rt2, b.messages), b.messages)
    assert len(llm.calls) == 1
    first_kept = [m for m in first if m.origin != "recall"]
    second_kept = [m for m in second if m.origin != "recall"]
    assert second_kept[: len(first_kept)] == first_kept
    assert second_kept[len(first_kept) :] == [b.messages[-1]]


async def test_trimmed_requests_recall_dropped_history_just_before_the_question(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM(default=SNAPSHOT))
    b = Builder("chat").system("sys").user("hi")
    b.assistant("hello")
    b.user("Decision: the job queue uses PostgreSQL advisory locks, not Redis.")
    b.assistant("Noted.")
    for step in range(60):
        b.call(("work", {"s": step}, noise(900, step)))
    b.user("Which locking did we choose for the job queue?")
    turn = turn_for(rt, b.messages)
    out = await govern_turn(rt, turn, turn.messages)
    assert out[-1] == b.messages[-1]  # the user's question stays the last message
    recall = out[-2]
    assert recall.origin == "recall"
    assert "advisory locks" in recall.text
    assert len(recall.text) < rt.settings.governance_recall_chars + 600


async def test_ephemeral_turns_are_governed_without_the_llm_or_the_store(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    llm = ScriptedLLM()
    rt = runtime(tmp_path, sqlite_store, llm)
    b = agentic("chat", 60)
    turn = Turn(
        key="e", namespace="e", model=MODEL, wire="chat", messages=b.messages, ephemeral=True
    )
    out = await govern_turn(rt, turn, turn.messages)
    assert llm.calls == []
    assert any("messages removed" in m.text for m in out if m.origin == "summary")
    assert sqlite_store.list_sessions() == []


async def test_disabled_governance_forwards_untouched_even_when_too_big(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM(), governance_enabled=False)
    messages = Builder("chat").user(noise(60_000, 1)).messages
    assert await govern_turn(rt, turn_for(rt, messages), messages) == messages


async def test_overflow_reaches_the_caller(tmp_path: Path, sqlite_store: SQLiteStore) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM())
    messages = Builder("chat").user(noise(60_000, 1)).messages
    with pytest.raises(ContextOverflow):
        await govern_turn(rt, turn_for(rt, messages), messages)


def test_postgres_mode_keeps_the_output_in_the_event(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    from memlane.engine.governance.setup import store_ledger

    settings = Settings(home=tmp_path, store_url="postgresql://nowhere/db")
    session = sqlite_store.ensure_session("pg")
    ledger = store_ledger(Runtime(settings, sqlite_store), session)
    message = Message("tool", "full output " * 100, "tool_result", call_id="c1")
    reference = ledger.offload(3, message, 200)
    event = sqlite_store.list_events(session.id, kind=EVENT_OFFLOADED)[0]
    assert event.payload["content"] == message.text
    assert reference == f"memlane event {event.id} of this session"
    assert not (tmp_path / "sessions").exists()


async def test_a_new_snapshot_becomes_the_scaffold_anchor(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    from memlane.engine import scaffold

    rt = runtime(tmp_path, sqlite_store, ScriptedLLM([SNAPSHOT]))
    turn = turn_for(rt, agentic("chat", 60).messages)
    await govern_turn(rt, turn, turn.messages)
    assert turn.session is not None
    assert scaffold.read_texts(rt, turn.session)["summary"] == "goal: set up the project"


async def test_a_failed_summary_never_overwrites_the_anchor(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    from memlane.engine import scaffold
    from memlane.text.llm import LLMError

    rt = runtime(tmp_path, sqlite_store, ScriptedLLM([LLMError("down")]))
    turn = turn_for(rt, agentic("chat", 60).messages)
    assert turn.session is not None
    scaffold.set_text(rt, turn.session, "summary", "written by a person")
    await govern_turn(rt, turn, turn.messages)
    assert scaffold.read_texts(rt, turn.session)["summary"] == "written by a person"


async def test_ungoverned_turns_are_forwarded_untouched(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM())
    messages = agentic("chat", 60).messages
    turn = turn_for(rt, messages)
    turn.governed = False
    assert await govern_turn(rt, turn, messages) == messages


async def test_a_turn_without_the_scaffold_is_still_governed(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM())
    messages = agentic("chat", 60).messages
    turn = turn_for(rt, messages)
    turn.managed = False  # a plain client: no scaffold, but the window guard holds
    assert len(await govern_turn(rt, turn, messages)) < len(messages)


async def test_only_the_newest_state_block_of_the_dropped_span_is_kept(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM(default=SNAPSHOT))
    messages = agentic("chat", 60).messages
    blocks = [
        Message("user", f"<memlane_state>todo v{i}</memlane_state>", origin="state")
        for i in range(3)
    ]
    with_state = [
        *messages[:10],
        blocks[0],
        *messages[10:20],
        blocks[1],
        *messages[20:30],
        blocks[2],
        *messages[30:],
    ]
    out = await govern_turn(rt, turn_for(rt, messages), with_state)
    kept = [m.text for m in out if m.origin == "state"]
    assert kept == [blocks[2].text]


async def test_a_changed_plan_is_saved_once_the_turns_messages_are_stored(
    tmp_path: Path, sqlite_store: SQLiteStore
) -> None:
    """Not in front of the request: the plan waits behind the turn's own store, which runs
    while the request is upstream, and the turn's `storing` covers it."""
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM())
    turn = turn_for(rt, [Message(role="user", text="a new session's first request")])
    release = threading.Event()
    messages_write = storing.queue(rt, turn, lambda: release.wait(10), messages=True)
    session_id = turn.session.id if turn.session else ""

    await govern_turn(rt, turn, turn.messages)
    assert PLAN_STATE not in sqlite_store.get_state(session_id)
    assert turn.storing is not messages_write  # the plan's write is queued behind it

    release.set()
    assert await rt.writes.settled(turn.session_of)
    assert PLAN_STATE in sqlite_store.get_state(session_id)


async def test_a_plan_that_cannot_be_saved_is_recorded_and_the_turn_goes_on(
    tmp_path: Path, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtime(tmp_path, sqlite_store, ScriptedLLM())
    turn = turn_for(rt, [Message(role="user", text="hello")])
    storing.queue(rt, turn, lambda: None, messages=True)  # the turn's messages

    def refused(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(sqlite_store, "set_state", refused)
    out = await govern_turn(rt, turn, turn.messages)
    assert await rt.writes.settled(turn.session_of)  # the failed write raised nothing
    assert out == turn.messages
    assert "disk full" in rt.activity.snapshot()["failures"]["governance"]["last"]


async def test_a_new_sessions_first_request_writes_its_row_before_it_keeps_what_it_cut(
    tmp_path: Path, sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new session is made ahead of its row (`engine.sessions.ahead`); an oversized first
    request offloads and drops in front of the request, so its ledger writes the row first.
    The anchor and the plan wait behind the turn's store."""
    from memlane.engine import scaffold

    rt = runtime(tmp_path, sqlite_store, ScriptedLLM(default=SNAPSHOT))
    made = made_session("fresh", "fresh", "")
    turn = Turn(
        key="fresh",
        namespace="fresh",
        model=MODEL,
        wire="chat",
        messages=agentic("chat", 60).messages,
        session=made,
        state={},
        made_ahead=made,
    )
    held = held_writes(rt, monkeypatch)
    storing.queue(rt, turn, lambda: None, messages=True)  # the turn's messages, held

    await govern_turn(rt, turn, turn.messages)
    row = sqlite_store.find_session("fresh")
    assert row is not None
    assert row.id == made.id
    assert sqlite_store.list_events(made.id, kind=EVENT_OFFLOADED)
    assert sqlite_store.list_events(made.id, kind=EVENT_DROPPED)
    assert PLAN_STATE not in sqlite_store.get_state(made.id)
    assert scaffold.read_texts(rt, made).get("summary", "") == ""

    held.release()
    assert await rt.writes.settled(turn.session_of)
    assert PLAN_STATE in sqlite_store.get_state(made.id)
    assert scaffold.read_texts(rt, made)["summary"] == "goal: set up the project"
    assert "governance" not in rt.activity.snapshot()["failures"]
