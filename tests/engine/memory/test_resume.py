"""The turns a stop left unremembered, re-derived from the store: answered ones only, once."""

from __future__ import annotations

import functools
import time
from dataclasses import replace

from memlane.config import Settings
from memlane.engine.memory import marks
from memlane.engine.memory.ingest import ingest_turns
from memlane.engine.memory.rederive import answered_positions
from memlane.engine.memory.resume import pending_turns, resume
from memlane.engine.runtime import Runtime
from memlane.store import NewMessage
from memlane.store.codec import now
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def conversation(rt: Runtime, *messages: Message) -> str:
    session = rt.store.ensure_session("k", namespace="repo")
    rt.store.append_messages(session.id, [NewMessage(m, 1) for m in messages])
    return session.id


def runtime(settings: Settings, store: SQLiteStore) -> Runtime:
    return Runtime(settings.model_copy(update={"memory_extract_facts": False}), store)


async def test_answered_turns_past_the_mark_are_pending_and_none_after_they_are_done(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store)
    session_id = conversation(
        rt,
        Message("system", "be brief"),
        Message("user", "remembered before"),
        Message("assistant", "yes"),
        Message("user", "first"),
        Message("assistant", "", kind="tool_call"),
        Message("tool", "ls output", kind="tool_result"),
        Message("assistant", "one"),
        Message("user", "second"),
        Message("assistant", "two"),
        Message("user", "not answered yet"),
    )
    sqlite_store.set_state(session_id, marks.MARK, "3")  # "remembered before" is done

    pending = pending_turns(rt)
    assert [(t.user_text, t.assistant_text, t.user_position) for t in pending] == [
        ("first", "one", 3),
        ("second", "two", 7),
    ]
    await ingest_turns(rt, pending)
    marks.advance(sqlite_store, session_id, 8)
    assert pending_turns(rt) == []
    marks.advance(sqlite_store, session_id, 4)  # a mark never moves back
    assert sqlite_store.get_state(session_id)[marks.MARK] == "8"


async def test_a_turn_whose_entries_were_written_keeps_them(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store)
    session_id = conversation(rt, Message("user", "first"), Message("assistant", "one"))
    sqlite_store.set_state(session_id, marks.MARK, "0")
    await ingest_turns(rt, pending_turns(rt))  # stopped before its mark moved
    (again,) = pending_turns(rt)
    assert again.entry_ids
    await ingest_turns(rt, [again])
    entries = sqlite_store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    assert sorted(e.role for e in entries) == ["assistant", "user"]  # not written twice


async def test_a_turn_stopped_between_its_two_entries_gets_the_answers_alone(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Each entry is its own write: a stop after the user's leaves the answer's to do."""
    rt = runtime(settings, sqlite_store)
    session_id = conversation(rt, Message("user", "first"), Message("assistant", "one"))
    sqlite_store.set_state(session_id, marks.MARK, "0")
    (turn,) = pending_turns(rt)
    await ingest_turns(rt, [replace(turn, assistant_text="")])  # the user's entry alone
    (again,) = pending_turns(rt)
    assert again.entry_ids
    await ingest_turns(rt, [again])
    entries = sqlite_store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    assert sorted((e.role, e.text) for e in entries) == [("assistant", "one"), ("user", "first")]
    (done,) = pending_turns(rt)  # its mark did not move: found whole a next time
    assert done.answer_entry_ids


async def test_an_answer_entry_is_found_for_its_own_turn_only(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Messages stored together share a time: the next turn's answer is not taken for
    written because the first's is."""
    rt = runtime(settings, sqlite_store)
    session_id = conversation(
        rt,
        Message("user", "first"),
        Message("assistant", "one"),
        Message("user", "second"),
        Message("assistant", "two"),
    )
    sqlite_store.set_state(session_id, marks.MARK, "0")
    first, _ = pending_turns(rt)
    await ingest_turns(rt, [first])  # stopped before the second turn's work
    done, second = pending_turns(rt)
    assert (bool(done.answer_entry_ids), second.answer_entry_ids) == (True, ())
    await ingest_turns(rt, [done, second])
    entries = sqlite_store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    assert sorted(e.text for e in entries) == ["first", "one", "second", "two"]


async def test_resuming_waits_for_the_entries_a_stop_left_in_their_files_alone(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """A stop between an entry's file and its row: the start-up catch-up indexes the file,
    and resuming reads the index after it, so the turn is not written twice."""
    rt = runtime(settings, sqlite_store)
    session_id = conversation(rt, Message("user", "first"), Message("assistant", "one"))
    sqlite_store.set_state(session_id, marks.MARK, "0")
    await ingest_turns(rt, pending_turns(rt))
    written = sqlite_store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    for entry in written:
        sqlite_store.purge_fact(entry.id)  # the files are written, their rows are not
    restarted = runtime(settings, sqlite_store)
    assert await resume(restarted) == 1
    await restarted.background.drain()
    entries = sqlite_store.list_facts(conversation_id=session_id, roles=("user", "assistant"))
    assert sorted(e.id for e in entries) == sorted(e.id for e in written)
    assert pending_turns(restarted) == []


def test_a_session_without_a_mark_is_not_remembered_again(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """A session from before marks: its history was never this process's to remember."""
    rt = runtime(settings, sqlite_store)
    conversation(rt, Message("user", "old"), Message("assistant", "history"))
    assert pending_turns(rt) == []


def test_a_resumed_turn_is_cut_to_the_memory_ceiling_like_a_live_one(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = Runtime(settings.model_copy(update={"memory_message_chars": 100}), sqlite_store)
    session_id = conversation(
        rt, Message("user", "x" * 5_000), Message("assistant", "ok"), Message("user", "next")
    )
    sqlite_store.set_state(session_id, marks.MARK, "0")
    (pending,) = pending_turns(rt)
    assert pending.user_text.startswith("x" * 100)
    assert len(pending.user_text) < 300  # the ceiling and its marker, not 5,000 characters
    assert pending.cut == (("user", 5_000),)
    assert pending.assistant_text == "ok"


def test_a_turn_stored_since_this_process_started_is_left_to_its_own_request(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Its request remembers it (`pipeline.finish`): resuming it too did its work twice
    (two extraction calls for one turn when a request beat the start-up catch-up)."""
    rt = runtime(settings, sqlite_store)
    session_id = conversation(rt, Message("user", "before the start"), Message("assistant", "a"))
    started = now()
    time.sleep(0.002)  # the clock moves on between the start and the next turn
    rt.store.append_messages(
        session_id,
        [NewMessage(Message("user", "after it"), 1), NewMessage(Message("assistant", "b"), 1)],
    )
    sqlite_store.set_state(session_id, marks.MARK, "0")

    assert [t.user_text for t in pending_turns(rt)] == ["before the start", "after it"]
    assert [t.user_text for t in pending_turns(rt, started)] == ["before the start"]


def test_a_mark_recorded_out_of_order_moves_only_past_turns_all_done(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store)
    session_id = conversation(
        rt,
        Message("user", "a"),
        Message("assistant", "1"),
        Message("user", "b"),
        Message("assistant", "2"),
        Message("user", "failed"),  # never answered: no memory work to wait for
        Message("user", "c"),
        Message("assistant", "3"),
    )
    sqlite_store.set_state(session_id, marks.MARK, "0")
    answered = functools.partial(answered_positions, rt, session_id)

    marks.record_done(sqlite_store, session_id, [5], answered)
    state = sqlite_store.get_state(session_id)
    assert (state[marks.MARK], marks.read_done(state)) == ("0", {5})
    marks.record_done(sqlite_store, session_id, [0], answered)
    state = sqlite_store.get_state(session_id)
    assert (state[marks.MARK], marks.read_done(state)) == ("1", {5})
    marks.record_done(sqlite_store, session_id, [2], answered)
    state = sqlite_store.get_state(session_id)
    assert state[marks.MARK] == "6"  # past the failed turn too: it has nothing to do
    assert marks.DONE not in state
    assert pending_turns(rt) == []
