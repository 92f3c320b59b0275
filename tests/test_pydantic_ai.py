"""The pydantic-ai history processor, on real pydantic-ai messages."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from memlane.config import Settings
from memlane.governance import GovernedHistory
from memlane.pydantic_ai import history_processor
from tests.engine.governance.helpers import noise
from tests.support.text import ScriptedLLM

SETTINGS = Settings(
    governance_context_windows={"small": 8_192},
    governance_safety_margin=512,
    governance_tool_output_limit=300,
    governance_protect_tokens=1_000,
    governance_summary_max_tokens=300,
)


def conversation(steps: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                SystemPromptPart(content="You are an agent."),
                UserPromptPart(content="Migrate the db; schema is in db/schema.sql."),
            ]
        ),
        ModelResponse(parts=[TextPart(content="Will do, schema in db/schema.sql.")]),
    ]
    for step in range(steps):
        messages.append(
            ModelResponse(
                parts=[
                    ThinkingPart(content=f"thinking {step}"),
                    ToolCallPart(tool_name="run", args={"step": step}, tool_call_id=f"a{step}"),
                    ToolCallPart(tool_name="run", args={"step": -step}, tool_call_id=f"b{step}"),
                ]
            )
        )
        messages.append(
            ModelRequest(
                parts=[
                    ToolReturnPart(
                        tool_name="run", content=noise(700, step), tool_call_id=f"a{step}"
                    ),
                    ToolReturnPart(
                        tool_name="run", content=noise(300, -step), tool_call_id=f"b{step}"
                    ),
                ]
            )
        )
    return messages


async def test_a_short_history_comes_back_as_the_same_objects() -> None:
    process = history_processor(GovernedHistory(model="small", settings=SETTINGS))
    messages = conversation(2)
    out = await process(messages)
    assert len(out) == len(messages)
    assert all(a is b for a, b in zip(out, messages, strict=True))


async def test_a_long_history_is_governed_and_stays_a_valid_pydantic_ai_history() -> None:
    llm = ScriptedLLM(default="<state_snapshot>migrating; schema db/schema.sql</state_snapshot>")
    process = history_processor(GovernedHistory(model="small", settings=SETTINGS, llm=llm))
    messages = conversation(40)
    out = await process(messages)
    assert len(out) < len(messages)
    assert out[0] is messages[0]
    assert out[1] is messages[1]
    summary = out[2]
    assert isinstance(summary, ModelRequest)
    assert "db/schema.sql" in str(summary.parts[0].content)
    calls: set[str] = set()
    for message in out:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.add(part.tool_call_id)
            if isinstance(part, ToolReturnPart):
                assert part.tool_call_id in calls  # never a return without its call
    assert out[-2] is messages[-1] or out[-1] is messages[-1]
    assert len(llm.calls) == 1


async def test_masked_tool_returns_are_copies_with_the_preview() -> None:
    settings = Settings(
        governance_context_windows={"small": 8_192},
        governance_safety_margin=512,
        governance_tool_output_limit=150,
        governance_protect_tokens=200,
        governance_compact_threshold=0.2,
        governance_compact_target=0.19,
    )
    process = history_processor(GovernedHistory(model="small", settings=settings))
    messages = conversation(5)
    out = await process(messages)
    masked = [
        part
        for message in out
        for part in message.parts
        if isinstance(part, ToolReturnPart) and str(part.content).startswith("[memlane: tool")
    ]
    assert masked
    assert all(part.tool_name == "run" for part in masked)
    originals = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert {part.tool_call_id for part in masked} <= originals
