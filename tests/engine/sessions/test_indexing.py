"""Session metadata with schema checks, retries, atomic meta.json, telemetry."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, cast

import pytest

from memlane.engine.runtime import Runtime
from memlane.engine.sessions.indexing import (
    INDEX_EVENT,
    MalformedMetadata,
    index_session,
    parse_metadata,
    schedule_index,
    startup_warnings,
)
from memlane.engine.sessions.metafile import meta_path, read_meta
from memlane.engine.sessions.serialize import OMITTED, keep_tail, serialize
from memlane.engine.turn import Turn
from memlane.store import NewMessage, Store
from memlane.store.sqlite import SQLiteStore
from memlane.text.llm import Completion, LLMError
from memlane.types import Message, ToolCall
from tests.engine.sessions.conftest import chat
from tests.support.stores import count_commits
from tests.support.text import ScriptedLLM

GOOD = json.dumps(
    {
        "name": "Confirm Button Refactor",
        "description": "Refactoring the confirm button.",
        "summary": "The confirm button was split into two components.",
        "tags": ["UI", "refactor", "ui"],
    }
)
TEN = [f"turn {i}" for i in range(10)]


# --- the parser (the prompt's contract) -------------------------------------------


def test_parse_good_answers() -> None:
    meta = parse_metadata(GOOD)
    assert meta.name == "confirm-button-refactor"
    assert meta.tags == ["ui", "refactor"]
    fenced = parse_metadata(f"```json\n{GOOD}\n```")
    assert fenced == meta
    extra = parse_metadata(json.dumps({**json.loads(GOOD), "mood": "happy"}))
    assert extra.name == meta.name


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Sure! Here it is: {", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"name": "x", "description": "d", "tags": []}), "'summary'"),
        (json.dumps({"name": "!!!", "description": "d", "summary": "s"}), "'name'"),
        (json.dumps({"name": "x", "description": "d", "summary": "s", "tags": "a"}), "'tags'"),
    ],
)
def test_parse_bad_answers(answer: str, reason: str) -> None:
    with pytest.raises(MalformedMetadata, match=reason):
        parse_metadata(answer)


# --- serialisation -------------------------------------------------------------------


def test_serialisation_keeps_only_user_and_assistant_text() -> None:
    messages = [
        Message(role="system", text="you are helpful"),
        Message(role="user", text="list files"),
        Message(role="assistant", kind="reasoning", text="thinking hard"),
        Message(role="assistant", kind="tool_call", tool_calls=(ToolCall("c", "ls", "{}"),)),
        Message(role="tool", kind="tool_result", text="secret.txt", call_id="c"),
        Message(role="user", text="[state]", origin="state"),
        Message(role="assistant", text="there is one file"),
    ]
    assert serialize(messages) == "User: list files\n\nAssistant: there is one file"


def test_cap_keeps_the_most_recent_part() -> None:
    text = "\n".join(f"line {i:04d}" for i in range(1000))
    cut = keep_tail(text, 200)
    assert len(cut) <= 200
    assert cut.startswith(OMITTED)
    assert cut.endswith("line 0999")
    assert "line 0000" not in cut
    assert keep_tail("short", 200) == "short"


# --- generation ------------------------------------------------------------------------


async def test_malformed_twice_then_valid_succeeds_on_the_third_attempt(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    rt: Runtime = make_rt(index_price_input=1.0, index_price_output=2.0)
    session = chat(sqlite_store, "k", TEN)
    scripted_llm.push(
        "not json at all",
        json.dumps({"name": "x"}),
        Completion(GOOD, "cheap-1", prompt_tokens=1000, completion_tokens=500),
    )
    result = await index_session(rt, session.id, model="req-model")
    assert result.ok
    assert result.attempts == 3
    assert len(scripted_llm.calls) == 3
    assert all(call.json_mode for call in scripted_llm.calls)
    assert scripted_llm.calls[0].model == "req-model"
    retry = scripted_llm.calls[1].messages
    assert retry[-2] == {"role": "assistant", "content": "not json at all"}
    assert "not valid JSON" in retry[-1]["content"]
    assert "'summary'" in scripted_llm.calls[2].messages[-1]["content"]

    events = sqlite_store.list_events(session.id, kind=INDEX_EVENT)
    assert [e.payload["success"] for e in events] == [False, False, True]
    assert [e.payload["attempt"] for e in events] == [1, 2, 3]
    assert events[2].payload["usage"] == {"prompt_tokens": 1000, "completion_tokens": 500}
    assert events[2].payload["cost_usd"] == pytest.approx(0.002)
    assert events[2].payload["model"] == "cheap-1"

    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert stored.metadata["name"] == "confirm-button-refactor"
    assert stored.metadata["last_indexed_position"] == 9
    assert stored.metadata["indexed_model"] == "cheap-1"
    on_disk = read_meta(meta_path(rt.settings.sessions_path, "k"))
    assert on_disk is not None
    assert on_disk["session_id"] == session.id
    assert on_disk["summary"] == "The confirm button was split into two components."
    assert on_disk["tags"] == ["ui", "refactor"]


async def test_transport_error_is_not_retried(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    session = chat(sqlite_store, "k", TEN)
    scripted_llm.push(LLMError("connection refused"), GOOD)
    result = await index_session(rt, session.id)
    assert not result.ok
    assert result.attempts == 1
    assert result.error == "connection refused"
    assert len(scripted_llm.calls) == 1
    events = sqlite_store.list_events(session.id, kind=INDEX_EVENT)
    assert [e.payload for e in events] == [
        {"success": False, "attempt": 1, "error": "connection refused"}
    ]
    stored = sqlite_store.get_session(session.id)
    assert stored is not None
    assert "name" not in stored.metadata
    assert not meta_path(rt.settings.sessions_path, "k").exists()


async def test_three_malformed_answers_give_up(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    session = chat(sqlite_store, "k", TEN)
    scripted_llm.push("a", "b", "c", GOOD)
    result = await index_session(rt, session.id)
    assert not result.ok
    assert result.attempts == 3
    assert len(scripted_llm.calls) == 3


async def test_corrupt_meta_file_is_reported_and_rewritten(
    rt: Runtime,
    sqlite_store: SQLiteStore,
    scripted_llm: ScriptedLLM,
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = chat(sqlite_store, "k", TEN)
    path = meta_path(rt.settings.sessions_path, "k")
    path.parent.mkdir(parents=True)
    path.write_text('{"name": "half', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="memlane.sessions.meta"):
        assert read_meta(path) is None
    assert "is not valid JSON" in caplog.text
    scripted_llm.push(GOOD)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memlane.sessions.meta"):
        result = await index_session(rt, session.id)
    assert result.ok
    assert "is not valid JSON" in caplog.text
    rewritten = json.loads(path.read_text(encoding="utf-8"))
    assert rewritten["name"] == "confirm-button-refactor"
    assert [p.name for p in path.parent.iterdir()] == ["meta.json"]  # no temp file left


async def test_forked_session_is_indexed_with_its_parent_context(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    parent = chat(sqlite_store, "p", TEN, summary="the parent built a parser")
    child = sqlite_store.fork_session(parent.id, new_key="c")
    scripted_llm.push(GOOD)
    await index_session(rt, child.id)
    assert "the parent built a parser" in scripted_llm.prompts[0]


# --- scheduling after turns --------------------------------------------------------------


def turn_for(rt: Runtime, key: str, *, ephemeral: bool = False) -> Turn:
    session = None if ephemeral else rt.store.ensure_session(key)
    return Turn(
        key=key,
        namespace=key,
        model="req-model",
        wire="chat",
        messages=[],
        session=session,
        ephemeral=ephemeral,
    )


def add_exchanges(store: SQLiteStore, key: str, count: int) -> None:
    session = store.ensure_session(key)
    start = len(store.list_messages(session.id)) // 2
    for i in range(start, start + count):
        store.append_messages(
            session.id,
            [
                NewMessage(Message(role="user", text=f"question {i}"), 1),
                NewMessage(Message(role="assistant", text=f"answer {i}"), 1),
            ],
        )


async def test_indexing_waits_for_five_new_user_messages(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.default = GOOD
    add_exchanges(sqlite_store, "k", 4)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    assert scripted_llm.calls == []

    add_exchanges(sqlite_store, "k", 1)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    assert len(scripted_llm.calls) == 1

    add_exchanges(sqlite_store, "k", 4)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    assert len(scripted_llm.calls) == 1
    add_exchanges(sqlite_store, "k", 1)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    assert len(scripted_llm.calls) == 2
    assert "question 9" in scripted_llm.prompts[1]
    titled = sqlite_store.find_session("k")
    assert titled is not None
    assert titled.title == "question 0"  # recorded once, in the background


async def test_ephemeral_turns_are_never_indexed(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.default = GOOD
    schedule_index(rt, turn_for(rt, "k", ephemeral=True))
    assert rt.background.pending == 0


async def test_invalid_index_configuration_warns_and_disables_indexing(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    rt: Runtime = make_rt(index_min_new_user_messages=0)
    warnings = startup_warnings(rt.settings)
    assert len(warnings) == 1
    assert "MEMLANE_INDEX_MIN_NEW_USER_MESSAGES" in warnings[0]
    add_exchanges(sqlite_store, "k", 6)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    assert scripted_llm.calls == []
    session = sqlite_store.find_session("k")
    assert session is not None
    result = await index_session(rt, session.id)
    assert not result.ok
    assert result.error == warnings[0]
    assert scripted_llm.calls == []
    assert (
        startup_warnings(make_rt(index_enabled=False, index_min_new_user_messages=0).settings) == []
    )


class ReadRecordingStore:
    """The real store, recording from where each `list_messages` or `list_message_texts`
    call reads."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.reads: list[int] = []
        self.rows = 0
        """How many messages the reads returned."""
        self.roles: list[object] = []
        """The roles each read asked for (None: every role)."""
        self.texts = 0
        """How many reads asked for the messages' words only (`list_message_texts`)."""

    def list_messages(self, session_id: str, **kwargs: Any) -> Any:
        return self._recorded(self.store.list_messages(session_id, **kwargs), kwargs)

    def list_message_texts(self, session_id: str, **kwargs: Any) -> Any:
        self.texts += 1
        return self._recorded(self.store.list_message_texts(session_id, **kwargs), kwargs)

    def _recorded(self, found: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        self.reads.append(kwargs.get("since_position", 0))
        self.roles.append(kwargs.get("roles"))
        self.rows += len(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_after_a_turn_only_messages_after_the_last_index_are_read(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.default = GOOD
    add_exchanges(sqlite_store, "k", 5)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    indexed = sqlite_store.find_session("k")
    assert indexed is not None
    assert len(scripted_llm.calls) == 1
    last = indexed.metadata["last_indexed_position"]

    add_exchanges(sqlite_store, "k", 2)
    recording = ReadRecordingStore(sqlite_store)
    watched = Runtime(
        rt.settings, cast(Store, recording), _llm=scripted_llm, _tokenizer=rt.tokenizer
    )
    schedule_index(watched, turn_for(watched, "k"))
    await watched.background.drain()
    assert recording.reads == [last + 1]
    assert len(scripted_llm.calls) == 1  # two new prompts are not enough yet


async def test_a_long_session_is_indexed_from_its_latest_messages_only(
    make_rt: Any, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    """Indexing a long session again reads the new messages and the tail its prompt holds,
    never the whole session, and the model reads the same text as from the whole."""
    rt: Runtime = make_rt(index_max_input_chars=1_000)
    scripted_llm.default = GOOD
    add_exchanges(sqlite_store, "k", 300)
    schedule_index(rt, turn_for(rt, "k"))
    await rt.background.drain()
    add_exchanges(sqlite_store, "k", 5)
    recording = ReadRecordingStore(sqlite_store)
    watched = Runtime(
        rt.settings, cast(Store, recording), _llm=scripted_llm, _tokenizer=rt.tokenizer
    )
    schedule_index(watched, turn_for(watched, "k"))
    await watched.background.drain()

    assert len(scripted_llm.calls) == 2
    assert 0 not in recording.reads
    assert recording.rows < 610 // 3  # of the session's 610 messages
    assert recording.texts == len(recording.reads)  # their words: no content decoded
    session = sqlite_store.find_session("k")
    assert session is not None
    whole = keep_tail(serialize(sqlite_store.list_messages(session.id)), 1_000)
    assert whole.startswith(OMITTED)
    assert scripted_llm.prompts[1].endswith(whole)
    assert session.metadata["last_indexed_position"] == 609


async def test_an_index_is_saved_in_one_commit(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM, monkeypatch: Any
) -> None:
    """The successful attempt's event and the session's metadata are one store commit."""
    scripted_llm.default = GOOD
    session = chat(sqlite_store, "k", TEN)
    commits = count_commits(sqlite_store, monkeypatch)
    result = await index_session(rt, session.id)
    assert result.ok
    assert len(commits) == 1
    saved = sqlite_store.get_session(session.id)
    assert saved is not None
    assert saved.metadata["name"] == "confirm-button-refactor"
    assert [
        e.payload["success"] for e in sqlite_store.list_events(session.id, kind=INDEX_EVENT)
    ] == [True]


async def test_an_agents_tool_results_are_not_read_to_decide_whether_to_index(
    rt: Runtime, sqlite_store: SQLiteStore, scripted_llm: ScriptedLLM
) -> None:
    """An agent's session holds a prompt, then hundreds of tool calls and results: its title
    and whether it is due are read from the user's prompts only, not from everything since
    the last index."""
    scripted_llm.default = GOOD
    session = sqlite_store.ensure_session("agent")
    call = Message(
        role="assistant", kind="tool_call", tool_calls=(ToolCall("c", "read_file", "{}"),)
    )
    output = Message(role="tool", kind="tool_result", text="x" * 2_000, call_id="c")
    sqlite_store.append_messages(session.id, [NewMessage(Message(role="user", text="fix it"), 1)])
    sqlite_store.append_messages(session.id, [NewMessage(m, 1) for m in [call, output] * 150])
    recording = ReadRecordingStore(sqlite_store)
    watched = Runtime(
        rt.settings, cast(Store, recording), _llm=scripted_llm, _tokenizer=rt.tokenizer
    )
    schedule_index(watched, turn_for(watched, "agent"))
    await watched.background.drain()
    assert scripted_llm.calls == []  # one prompt: not due
    assert recording.roles == [("user",), ("user",)]  # the title's, then the decision's
    assert recording.rows == 2
    titled = sqlite_store.get_session(session.id)
    assert titled is not None
    assert titled.title == "fix it"
