"""Where the recalled-memory block lands decides what stays in the provider's prompt cache."""

from __future__ import annotations

from memlane.engine.memory.block import inject
from memlane.types import Message, ToolCall


def user(text: str) -> Message:
    return Message(role="user", text=text)


def test_a_fresh_turn_reads_memories_then_the_question() -> None:
    history = [Message(role="system", text="sys"), user("first"), Message("assistant", "ok")]
    out = inject([*history, user("what is my editor?")], "BLOCK")
    assert [m.text for m in out] == ["sys", "first", "ok", "BLOCK", "what is my editor?"]
    assert out[3].origin == "recall"


def test_a_tool_loop_under_way_gets_the_block_at_the_end() -> None:
    call = Message("assistant", kind="tool_call", tool_calls=(ToolCall("c1", "shell", "{}"),))
    result = Message("tool", "output", kind="tool_result", call_id="c1")
    request = [user("fix the build"), call, result]
    out = inject(request, "BLOCK")
    assert out[:3] == request
    assert out[3].text == "BLOCK"


def test_memlane_items_after_the_users_message_still_make_a_fresh_turn() -> None:
    state = Message("developer", "<memlane_state>…</memlane_state>", origin="state")
    out = inject([user("hello"), state], "BLOCK")
    assert [m.text for m in out] == ["BLOCK", "hello", state.text]


def test_the_next_turn_keeps_the_previous_requests_prefix_apart_from_the_block() -> None:
    call = Message("assistant", kind="tool_call", tool_calls=(ToolCall("c1", "shell", "{}"),))
    result = Message("tool", "output", kind="tool_result", call_id="c1")
    loop = [user("fix the build"), call, result]
    before = inject(loop, "BLOCK")
    after = inject([*loop, Message("assistant", "done"), user("thanks")], "BLOCK2")
    assert after[: len(before) - 1] == before[:-1]
