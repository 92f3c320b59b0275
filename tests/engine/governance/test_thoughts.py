from __future__ import annotations

from memlane.engine.governance.flow import govern
from memlane.engine.governance.thoughts import strip
from memlane.types import Message
from tests.engine.governance.helpers import Builder, governor, noise, settings_for


def test_reasoning_fields_leave_chat_messages_and_items_leave_entirely() -> None:
    b = Builder("chat").user("go")
    b.call(("a", {}, "x"))
    call = b.messages[1]
    assert call.raw is not None
    assert "reasoning_content" in call.raw
    stripped = strip(call)
    assert stripped is not None
    assert stripped.raw is not None
    assert "reasoning_content" not in stripped.raw
    assert stripped.tool_calls == call.tool_calls
    assert strip(Message("assistant", "hmm", "reasoning")) is None


async def test_finished_turns_lose_reasoning_the_unfinished_loop_keeps_it() -> None:
    gov = governor(settings_for())
    b = Builder("responses").system("sys").user("first task")
    b.reasoning("early thoughts")
    b.call(("read", {}, "content"))
    b.assistant("first answer")
    for step in range(40):
        b.user(f"task {step}")
        b.reasoning(f"thinking about {step}")
        b.call(("work", {"s": step}, noise(800, step)))
        b.assistant(f"done {step}")
    b.user("final task")
    b.reasoning("current encrypted thinking")
    b.call(("work", {"s": "final"}, "partial"))
    governed = await govern(gov, b.messages, user_text="final task")
    out = governed.messages
    head = out[: out.index(next(m for m in out if m.origin == "summary"))]
    assert not any(m.kind == "reasoning" for m in head)
    current = [m for m in out if m.kind == "reasoning" and m.text == "current encrypted thinking"]
    assert len(current) == 1
    assert current[0].raw is not None
    assert current[0].raw["encrypted_content"].startswith("gAAAA")
