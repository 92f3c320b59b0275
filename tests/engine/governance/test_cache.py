"""Cache-stable compaction: between compactions a request only appends to the previous one."""

from __future__ import annotations

import json

import pytest

from memlane.engine.governance.flow import govern
from memlane.engine.governance.ledger import MemoryLedger
from memlane.engine.governance.plan import Plan
from memlane.types import Message
from tests.engine.governance.helpers import (
    WIRES,
    WireName,
    agentic,
    assert_valid,
    governor,
    noise,
    render,
    settings_for,
)
from tests.support.text import ScriptedLLM


def wire_bytes(wire: WireName, messages: list[Message]) -> list[bytes]:
    kept = [m for m in messages if m.origin not in ("recall", "note")]
    return [json.dumps(item, sort_keys=True).encode() for item in render(wire, kept)]


@pytest.mark.parametrize("wire", WIRES)
async def test_appending_requests_forward_a_byte_stable_prefix(wire: WireName) -> None:
    llm = ScriptedLLM(default="<state_snapshot>goal: set up; config/settings.toml</state_snapshot>")
    gov = governor(settings_for(), ledger=MemoryLedger(), llm=llm)
    b = agentic(wire, 0)
    previous: list[bytes] = []
    compactions = 0
    requests = 0
    for step in range(150):
        if step % 5 == 0:
            b.user(f"step {step}: continue with config/settings.toml")
        b.call((f"tool{step % 4}", {"step": step}, noise(300 + (step * 97) % 2_500, step)))
        governed = await govern(gov, b.messages, user_text=f"step {step}")
        requests += 1
        out = governed.messages
        assert gov.total(out) <= gov.budget.limit
        assert_valid(out)
        current = wire_bytes(wire, out)
        if governed.stats.compacted:
            compactions += 1
        else:
            assert current[: len(previous)] == previous, f"prefix rewritten at step {step}"
        previous = current
    assert compactions >= 3
    assert compactions <= requests // 5  # compaction is a step, not a per-request rewrite
    assert len(llm.calls) == compactions  # the summariser runs only at compactions


async def test_a_rewritten_history_invalidates_the_plan() -> None:
    ledger = MemoryLedger()
    gov = governor(settings_for(), ledger=ledger)
    b = agentic("chat", 60)
    first = await govern(gov, b.messages, user_text="x")
    assert first.plan.trims
    edited = list(b.messages)
    edited[first.plan.covered - 1] = edited[first.plan.covered - 1].with_text("edited")
    assert not ledger.plan.matches(edited)
    short = agentic("chat", 2).messages
    second = await govern(gov, short, user_text="x")
    assert second.plan == Plan(model=gov.model)
    assert second.messages == short


def test_plans_survive_a_json_round_trip_and_bad_json_is_no_plan() -> None:
    plan = Plan(
        covered=9,
        anchor="f",
        head=2,
        dropped=7,
        pinned=(4,),
        snapshot="s",
        summarised=4,
        masked={3: "/x"},
        strip_reasoning=True,
        compactions=2,
        loops_noted=("k",),
        model="m",
    )
    assert Plan.from_json(plan.to_json()) == plan
    assert Plan.from_json("{not json") == Plan()
    assert Plan.from_json('{"version": 99}') == Plan()
    assert Plan.from_json(None) == Plan()
