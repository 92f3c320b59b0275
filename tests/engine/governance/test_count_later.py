"""A request that fits by its size alone is forwarded without being counted first.

Its exact count (the `X-Memlane-Context` header, the turn's record) is made off its front,
while the request is upstream (`governance.counting`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from memlane.engine.governance import counted, govern_turn
from memlane.engine.governance.cache import Governor
from memlane.engine.governance.flow import govern
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import made_session, write_made
from memlane.engine.threads import TRAFFIC
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message, ToolCall
from tests.engine.governance.helpers import MODEL, governor, settings_for
from tests.support.text import ScriptedLLM


def chat(turns: int, words: int = 40) -> list[Message]:
    out = [Message(role="system", text="You are a careful coding agent.")]
    for i in range(turns):
        text = " ".join(f"word{(i + k) % 97}" for k in range(words))
        out.append(Message(role="user" if i % 2 == 0 else "assistant", text=text))
    return out


def uncountable(gov: Governor, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(messages: object) -> int:
        raise AssertionError("counted in front of the request")

    monkeypatch.setattr(gov, "total", refused)


async def test_a_request_under_the_threshold_by_its_size_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gov = governor(settings_for())
    messages = chat(6)
    exact = gov.total(messages)
    uncountable(gov, monkeypatch)

    governed = await govern(gov, messages, count_later=True)
    assert not governed.counted
    assert governed.messages == messages
    assert (governed.stats.tokens_in, governed.stats.tokens_out) == (0, 0)
    monkeypatch.undo()
    assert gov.total(governed.messages) == exact


async def test_without_count_later_or_over_the_bound_the_count_decides() -> None:
    """The bound only short-cuts: a request whose bytes exceed the threshold is counted, and
    is compacted only if its tokens do (ASCII words: about four bytes per token)."""
    gov = governor(settings_for())
    small = chat(6)
    exact = await govern(gov, small)
    assert exact.counted
    assert exact.stats.tokens_in == gov.total(small)

    threshold = gov.budget.threshold
    big = chat(60, words=30)
    assert gov.total(big) < threshold < sum(gov.tokenizer.bound(m) for m in big)
    governed = await govern(gov, big, count_later=True)
    assert governed.counted
    assert governed.stats.tokens_in == gov.total(big)
    assert not governed.stats.compacted


async def test_a_loop_note_is_counted_in_front() -> None:
    gov = governor(settings_for())
    messages = chat(2)
    for i in range(6):
        call = ToolCall(id=f"c{i}", name="read_file", arguments='{"path": "a.py"}')
        messages.append(Message(role="assistant", text="", tool_calls=(call,)))
        messages.append(Message(role="tool", text="same content", call_id=f"c{i}"))
    governed = await govern(gov, messages, count_later=True)
    assert governed.counted
    assert governed.messages[-1].origin == "note"
    assert governed.stats.tokens_out == gov.total(governed.messages)


def turn_of(rt: Runtime, messages: list[Message], *, new: bool) -> Turn:
    """A new session's turn (made ahead of its row), or a turn of a session that exists."""
    if new:
        session = made_session("counted-later", "counted-later", "")
    else:
        session = rt.store.ensure_session("counted-later")
    return Turn(
        key="counted-later",
        namespace="counted-later",
        model=MODEL,
        wire="chat",
        messages=messages,
        session=session,
        state={} if new else None,
        made_ahead=session if new else None,
    )


@pytest.mark.parametrize(("new", "others"), [(True, 0), (True, 1), (False, 0), (False, 1)])
async def test_the_turns_counts_arrive_once_counted(
    tmp_path: Path, sqlite_store: SQLiteStore, new: bool, others: int
) -> None:
    """A new session's unseen texts are counted beside the upstream call. So are a next
    turn's when no other request is in hand (the loop is free while it is upstream);
    while `others` are, its texts, memoised but for its newest, are counted in front,
    where a thread trip cost more."""
    rt = Runtime(settings_for(tmp_path), sqlite_store, _llm=ScriptedLLM())
    messages = chat(6)
    turn = turn_of(rt, messages, new=new)
    if turn.made_ahead is not None:  # as the turn's store does while the request is upstream
        write_made(rt.store, turn.made_ahead)
    later = new or not others
    with contextlib.ExitStack() as in_hand:
        for _ in range(1 + others):  # this request, and the others in memlane's hands
            in_hand.enter_context(TRAFFIC.serving())
        out = await govern_turn(rt, turn, messages)
    assert out == messages
    assert (turn.counting is not None) is later
    assert (turn.context is None) is later

    await counted(turn)
    tokens = governor(rt.settings).total(messages)
    limit = governor(rt.settings).budget.limit
    assert turn.context == (tokens, limit, False)
    assert turn.governed_tokens == (tokens, tokens)
    assert await rt.writes.settled(turn.session_of)  # the plan, saved behind
    assert "governance" not in rt.activity.snapshot()["failures"]
