"""The state block: texts, normalisation, rendering, and placement that keeps prefixes stable."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine import scaffold
from memlane.engine.governance.ledger import PLAN_STATE
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Answer, Forward, Turn
from memlane.files.scaffold import normalize_escapes
from memlane.store import NewMessage, SessionNotFound
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message
from tests.support.fsyncs import counted_fsyncs


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("line one\\nline two", "line one\nline two"),
        ("it\\u2019s done", "it’s done"),
        ('"quoted\\nJSON string"', "quoted\nJSON string"),
        ('tab\\there \\"q\\"', 'tab\there "q"'),
        ("windows\\r\\nline", "windows\nline"),
        ('real\nnewline keeps printf("\\n")', 'real\nnewline keeps printf("\\n")'),
        ("lone \\ud800 surrogate", "lone \\ud800 surrogate"),
        ("plain text", "plain text"),
        ('"not json', '"not json'),
    ],
)
def test_normalize_escapes(raw: str, expected: str) -> None:
    assert normalize_escapes(raw) == expected


def test_block_parts_order_caps_and_toggles(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("agents rules")
    settings = Settings(home=tmp_path, harness_root=tmp_path, todo_max_chars=40)
    texts = {"pinned": "pin", "summary": "so far", "todo": "t" * 100}
    block = scaffold.block_for(settings, texts, spec_mode=True)
    assert block.startswith("<memlane_state>\n<pinned>\npin\n\nagents rules\n</pinned>\n<anchor>")
    assert "<todo>\n" + "t" * 15 + "\n[… truncated by memlane]\n</todo>" in block
    assert block.endswith(f"<spec>\n{scaffold.SPEC_PROMPT}\n</spec>\n</memlane_state>")
    approved = scaffold.block_for(settings, {**texts, "spec_approved": "1"}, spec_mode=True)
    assert "<spec>" not in approved
    off = Settings(home=tmp_path, pinned_enabled=False, anchor_enabled=False, todo_enabled=False)
    assert scaffold.block_for(off, texts, spec_mode=False) == ""


@pytest.fixture(params=["files", "store"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings(home=tmp_path, embedding_backend="hashing", scaffold_store=request.param)
    store = SQLiteStore(settings.database_path)
    yield Runtime(settings, store)
    store.close()


def user(text: str) -> Message:
    return Message("user", text, wire="chat")


def assistant(text: str) -> Message:
    return Message("assistant", text, wire="chat")


async def run_turn(rt: Runtime, messages: list[Message], **turn: Any) -> list[Message]:
    from memlane.engine.turn_store import store_answer, store_incoming

    t = Turn(key="s", namespace="s", model="m", wire="chat", messages=messages, **turn)
    store_incoming(rt, t)
    out = await scaffold.add_state_block(rt, t, list(messages))
    store_answer(rt, t, Answer([assistant(f"re: {messages[-1].text}")]))
    return out


async def test_blocks_are_replayed_where_they_were_sent(rt: Runtime) -> None:
    session = rt.store.ensure_session("s")
    history: list[Message] = []
    sent: list[list[Message]] = []
    for turn, todo in enumerate(["a", "a", "b", "b"]):
        scaffold.set_text(rt, session, "todo", todo)
        history.append(user(f"u{turn}"))
        sent.append(await run_turn(rt, list(history)))
        history.append(assistant(f"re: u{turn}"))
    texts = [[m.text for m in request] for request in sent]
    for earlier, later in itertools.pairwise(texts):
        assert later[: len(earlier)] == earlier
    assert [m.origin for m in sent[-1]] == [
        "client",
        "state",
        "client",
        "client",
        "client",
        "client",
        "state",
        "client",
        "client",
    ]


async def test_memlane_items_of_other_stages_keep_their_place(rt: Runtime) -> None:
    session = rt.store.ensure_session("s")
    scaffold.set_text(rt, session, "pinned", "p")
    reference = Message("user", "@@other says hi", origin="reference")
    first = await run_turn(rt, [user("u0"), reference])
    assert [m.origin for m in first] == ["client", "reference", "state"]
    second = await run_turn(
        rt, [user("u0"), reference, assistant("re: @@other says hi"), user("u1")]
    )
    assert [m.origin for m in second] == ["client", "reference", "state", "client", "client"]


async def test_an_edited_history_drops_the_blocks_of_the_dead_branch(rt: Runtime) -> None:
    session = rt.store.ensure_session("s")
    scaffold.set_text(rt, session, "todo", "a")
    await run_turn(rt, [user("u0")])
    scaffold.set_text(rt, session, "todo", "b")
    await run_turn(rt, [user("u0"), assistant("re: u0"), user("u1")])
    edited = await run_turn(rt, [user("u0"), assistant("re: u0"), user("u1 edited")])
    assert [m.text for m in edited if m.origin == "state"] == [
        "<memlane_state>\n<todo>\na\n</todo>\n</memlane_state>",
        "<memlane_state>\n<todo>\nb\n</todo>\n</memlane_state>",
    ]
    assert edited[-1].origin == "state"  # re-sent after the edited message: the old one is gone


async def test_continued_and_ephemeral_turns(rt: Runtime) -> None:
    session = rt.store.ensure_session("s")
    scaffold.set_text(rt, session, "todo", "t")
    await run_turn(rt, [user("u0")])
    chained = await run_turn(rt, [user("u1")], continued=True)
    assert [m.origin for m in chained] == ["client"]  # the upstream already holds the block
    ephemeral = Turn("s", "s", "m", "chat", [user("x")], ephemeral=True)
    out = await scaffold.add_state_block(rt, ephemeral, [user("x")])
    assert [m.origin for m in out] == ["client", "state"]
    unmanaged = Turn("s", "s", "m", "chat", [user("x")], managed=False)
    assert await scaffold.add_state_block(rt, unmanaged, [user("x")]) == [user("x")]


def test_texts_round_trip_and_caps(rt: Runtime) -> None:
    session = rt.store.ensure_session("k")
    assert scaffold.set_text(rt, session, "todo", "x" * 5000) is not None
    assert len(scaffold.read_texts(rt, session)["todo"]) == rt.settings.todo_max_chars
    scaffold.set_text(rt, session, "pinned", "it\\u2019s pinned")
    assert scaffold.read_texts(rt, session)["pinned"] == "it’s pinned"
    scaffold.set_text(rt, session, "pinned", "")
    assert "pinned" not in scaffold.read_texts(rt, session)
    with pytest.raises(ValueError, match="unknown state text"):
        scaffold.set_text(rt, session, "password", "x")
    scaffold.approve_spec(rt, session.id)
    assert scaffold.read_texts(rt, session)["spec_approved"] == "1"
    with pytest.raises(SessionNotFound):
        scaffold.approve_spec(rt, "no-such-session")
    scaffold.forget_texts(rt, session)
    assert scaffold.read_texts(rt, session) == {}


def test_state_messages_are_not_matched_as_client_history(rt: Runtime) -> None:
    session = rt.store.ensure_session("s")
    rt.store.sync_messages(session.id, [NewMessage(user("u0"))])
    rt.store.append_messages(session.id, [NewMessage(Message("system", "b", origin="state"))])
    result = rt.store.sync_messages(session.id, [NewMessage(user("u0")), NewMessage(user("u1"))])
    assert (result.matched, len(result.added), result.superseded) == (1, 1, 0)


async def test_a_block_shaped_before_its_turn_is_stored_is_stored_with_it(rt: Runtime) -> None:
    """Through the pipeline a turn's block is decided from what earlier turns stored and
    kept while the request is on its way upstream: replayed where it was sent all the same."""
    from memlane.engine import pipeline

    quiet = Runtime(rt.settings.model_copy(update={"memory_enabled": False}), rt.store)
    history: list[Message] = []
    sent: list[list[str]] = []
    for turn, todo in enumerate(["a", "a", "b"]):
        history.append(user(f"u{turn}"))
        t = Turn(
            key="s",
            namespace="s",
            model="m",
            wire="chat",
            messages=list(history),
            flags={"todo": todo},
        )
        prepared = await pipeline.prepare(quiet, t)
        assert isinstance(prepared, Forward)
        assert t.storing is not None  # stored on the way, not in front of the request
        sent.append([m.text for m in prepared.messages])
        answer = assistant(f"re: u{turn}")
        await pipeline.finish(quiet, t, Answer([answer]))
        history.append(answer)
    assert await quiet.writes.settled()

    for earlier, later in itertools.pairwise(sent):
        assert later[: len(earlier)] == earlier
    session = rt.store.find_session("s")
    assert session is not None
    origins = [m.message.origin for m in rt.store.list_messages(session.id)]
    assert origins == ["client", "state", *["client"] * 4, "state", "client"]
    assert "<todo>\nb\n</todo>" in rt.store.list_messages(session.id)[6].message.text

    # the client rewinds to its second question: the block sent after the edit point goes
    edited = [*history[:2], user("u1 edited")]
    t = Turn(key="s", namespace="s", model="m", wire="chat", messages=edited, flags={"todo": "b"})
    prepared = await pipeline.prepare(quiet, t)
    assert isinstance(prepared, Forward)
    assert [m.text for m in prepared.messages][:4] == [*sent[1][:3], "u1 edited"]
    assert "<todo>\nb\n</todo>" in prepared.messages[-1].text  # sent again: a new block
    await pipeline.stored(quiet, t)


async def test_a_next_turn_still_sending_what_its_latest_block_followed_reads_no_history(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block keeps a digest of the client messages it followed: a request that still
    sends them, unchanged, cannot have cut it off, so the stored history's hashes are not
    read (`Store.edit_point`) in front of it. An edit before the block is still found
    there, and a block kept without the digest (an older memlane's) reads as before."""
    from memlane.engine import pipeline, turn_store

    edits: list[int] = []
    edit_point = rt.store.edit_point

    def counted_edit_point(session_id: str, messages: Any) -> int | None:
        edits.append(len(messages))
        return edit_point(session_id, messages)

    monkeypatch.setattr(rt.store, "edit_point", counted_edit_point)

    async def turn(history: list[Message]) -> list[Message]:
        t = Turn(key="s", namespace="s", model="m", wire="chat", messages=list(history))
        t.flags = {"todo": "- [ ] a"}
        prepared = await pipeline.prepare(rt, t)
        await pipeline.stored(rt, t)
        turn_store.store_answer(rt, t, Answer([assistant(f"re: {history[-1].text}")]))
        assert isinstance(prepared, Forward)
        return prepared.messages

    await turn([user("u0")])
    shaped = await turn([user("u0"), assistant("re: u0"), user("u1")])
    assert [m.origin for m in shaped] == ["client", "state", "client", "client"]
    assert edits == []

    edited = await turn([user("u0 edited"), assistant("re: u0"), user("u1")])
    assert [m.origin for m in edited] == ["client", "client", "client", "state"]  # sent anew
    assert edits == [3]

    session = rt.store.find_session("s")
    assert session is not None
    rows = json.loads(rt.store.get_state(session.id)[scaffold.BLOCKS_STATE])
    rt.store.set_state(session.id, scaffold.BLOCKS_STATE, json.dumps([r[:4] for r in rows]))
    again = await turn([user("u0 edited"), assistant("re: u0"), user("u1"), user("u2")])
    assert [m.origin for m in again] == ["client", "client", "client", "state", "client"]
    assert edits == [3, 4]


@pytest.mark.parametrize("on_the_loop", [True, False], ids=["loop", "worker"])
async def test_a_next_turn_reads_its_sessions_state_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, on_the_loop: bool
) -> None:
    """The scaffold's blocks (and its texts, when the store keeps them) and governance's
    plan come from one read of the session's state, with the session's row, in front of
    the request: on the loop or in a worker thread."""
    from memlane.engine import pipeline, turn_store

    monkeypatch.setattr(pipeline, "reads_on_the_loop", lambda rt: on_the_loop)
    history = [user("u0")]
    first = Turn(key="s", namespace="s", model="m", wire="chat", messages=list(history))
    first.flags = {"todo": "- [ ] a"}
    await pipeline.prepare(rt, first)
    await pipeline.stored(rt, first)
    turn_store.store_answer(rt, first, Answer([assistant("re: u0")]))
    assert first.session is not None
    assert PLAN_STATE in rt.store.get_state(first.session.id)  # governance keeps one
    history += [assistant("re: u0"), user("u1")]
    reads: list[str] = []
    get_state, find_session_state = rt.store.get_state, rt.store.find_session_state

    def counted_get(session_id: str) -> dict[str, str]:
        reads.append("get_state")
        return get_state(session_id)

    def counted_find(key: str, *, tenant: str = "") -> Any:
        reads.append("find_session_state")
        return find_session_state(key, tenant=tenant)

    monkeypatch.setattr(rt.store, "get_state", counted_get)
    monkeypatch.setattr(rt.store, "find_session_state", counted_find)
    nxt = Turn(key="s", namespace="s", model="m", wire="chat", messages=list(history))
    nxt.flags = {"todo": "- [ ] a"}
    prepared = await pipeline.prepare(rt, nxt)
    await pipeline.stored(rt, nxt)

    assert isinstance(prepared, Forward)
    assert [m.origin for m in prepared.messages] == ["client", "state", "client", "client"]
    assert reads == ["find_session_state"]


async def test_a_todo_from_the_header_is_kept_without_a_sync_and_one_the_user_sets_with_one(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header's TODO comes again with every request: writing its file with fsyncs held
    the store's writer (and each batch behind it) for every new session."""
    from memlane.engine import pipeline

    quiet = Runtime(rt.settings.model_copy(update={"memory_enabled": False}), rt.store)
    synced = counted_fsyncs(monkeypatch)
    t = Turn(
        key="t", namespace="t", model="m", wire="chat", messages=[user("go")], flags={"todo": "a"}
    )
    assert isinstance(await pipeline.prepare(quiet, t), Forward)
    await pipeline.finish(quiet, t, Answer([assistant("ok")]))
    assert await quiet.writes.settled()
    session = rt.store.find_session("t")
    assert session is not None
    assert scaffold.read_texts(rt, session)["todo"] == "a"
    assert synced == []
    scaffold.set_text(rt, session, "todo", "b")
    if rt.settings.scaffold_store == "files":  # the store's commit is its own matter
        assert synced  # what the user sets is synced
