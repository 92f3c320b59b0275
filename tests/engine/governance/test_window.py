"""Pass 1 and pass 2 on both wire formats, through the real adapters."""

from __future__ import annotations

import pytest

from memlane.engine.governance.cache import PREVIEW_REFERENCE
from memlane.engine.governance.flow import govern
from memlane.engine.governance.ledger import MemoryLedger
from memlane.engine.governance.render import SUMMARY_TITLE
from tests.engine.governance.helpers import (
    WIRES,
    Builder,
    WireName,
    agentic,
    assert_valid,
    governor,
    noise,
    render,
    settings_for,
)
from tests.support.text import ScriptedLLM

SNAPSHOT = (
    "<state_snapshot>goal: set up the project; config in config/settings.toml</state_snapshot>"
)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_long_session_is_brought_below_the_target_and_stays_valid(wire: WireName) -> None:
    llm = ScriptedLLM(default=SNAPSHOT)
    gov = governor(settings_for(), llm=llm)
    messages = agentic(wire, 60).messages
    governed = await govern(gov, messages, user_text="anything")
    out = governed.messages
    assert governed.stats.tokens_in > gov.budget.limit
    assert gov.total(out) <= gov.budget.target
    assert_valid(out)
    render(wire, out)  # the adapter can put it back on the wire
    # head: instructions, the task and the first run's answer, verbatim
    assert [m.text for m in out[:2]] == [messages[0].text, messages[1].text]
    assert any(m.text.startswith("Project set up") for m in out[:8])
    summary = next(m for m in out if m.origin == "summary")
    assert "config/settings.toml" in summary.text
    assert summary.text.startswith(SUMMARY_TITLE.format(count=governed.plan.summarised))
    # tail: the newest items are forwarded untouched (same wire item)
    assert out[-1] is messages[-1]
    assert len(llm.calls) == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_old_large_tool_outputs_are_masked_with_a_pointer_and_ids_kept(
    wire: WireName,
) -> None:
    ledger = MemoryLedger()
    settings = settings_for(governance_compact_threshold=0.25, governance_compact_target=0.2)
    gov = governor(settings, ledger=ledger)
    b = Builder(wire).system("sys").user("task")
    big = noise(6_000, 1)
    first = b.call(("grep", {"q": "x"}, big))[0]
    b.assistant("found it")
    for step in range(3):
        b.call(("ls", {"n": step}, noise(800, step)))
    governed = await govern(gov, b.messages, user_text="task")
    out = governed.messages
    masked = next(m for m in out if m.kind == "tool_result" and m.call_id == first)
    assert masked.text.startswith("[memlane: tool output trimmed")
    assert masked.text.count(big[:100]) == 1  # the head of the output is previewed
    assert big[-50:] in masked.text  # and its tail
    assert len(masked.text) < 1_600
    assert big in ledger.outputs.values()  # the full output is kept
    assert not governed.trimmed  # masking alone was enough: nothing dropped
    # newest results are in the protection window: untouched
    assert out[-1].text == b.messages[-1].text
    assert_valid(out)
    wire_items = render(wire, out)
    key = "tool_call_id" if wire == "chat" else "call_id"
    assert any(item.get(key) == first for item in wire_items)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_tool_result_larger_than_the_whole_budget_is_masked_even_when_newest(
    wire: WireName,
) -> None:
    gov = governor(settings_for())
    b = Builder(wire).system("sys").user("read the log")
    huge = noise(60_000, 3)  # ~ 3x the whole window
    b.call(("read_log", {}, huge))
    governed = await govern(gov, b.messages, user_text="read the log")
    assert gov.total(governed.messages) <= gov.budget.limit
    assert governed.messages[-1].text.startswith("[memlane: tool output trimmed")
    assert_valid(governed.messages)


def test_masking_off_leaves_outputs_alone() -> None:
    from memlane.engine.governance import mask

    settings = settings_for(governance_tool_output_limit=0)
    gov = governor(settings)
    items = agentic("chat", 10, output_chars=4_000).messages
    counts = [gov.count(m) for m in items]
    assert mask.choose(items, counts, settings, gov.budget, {}) == []


@pytest.mark.parametrize("wire", WIRES)
async def test_parallel_calls_in_the_tail_keep_every_result(wire: WireName) -> None:
    gov = governor(settings_for())
    b = agentic(wire, 30)
    b.user("check three files at once")
    ids = b.call(
        ("cat", {"f": 1}, noise(500, 7)),
        ("cat", {"f": 2}, noise(500, 8)),
        ("cat", {"f": 3}, noise(500, 9)),
    )
    out = (await govern(gov, b.messages, user_text="files")).messages
    assert_valid(out)
    results = [m.call_id for m in out if m.kind == "tool_result"]
    assert set(ids) <= set(results)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_long_agentic_turn_keeps_its_instruction_pinned(wire: WireName) -> None:
    gov = governor(settings_for())
    b = Builder(wire).system("sys").user("hello")
    b.assistant("hi, what shall we do?")
    b.user("Refactor the parser in src/parse.py and keep the public API.")
    for step in range(50):
        b.call(("edit", {"step": step}, noise(900, step)))
    governed = await govern(gov, b.messages, user_text="Refactor the parser")
    out = governed.messages
    texts = [m.text for m in out]
    assert "Refactor the parser in src/parse.py and keep the public API." in texts
    assert governed.plan.pinned
    assert_valid(out)
    assert gov.total(out) <= gov.budget.limit


async def test_governance_off_below_the_threshold_changes_nothing() -> None:
    gov = governor(settings_for())
    messages = agentic("chat", 2).messages
    governed = await govern(gov, messages, user_text="x")
    assert governed.messages == messages
    assert not governed.trimmed
    assert not governed.stats.compacted


def test_a_tool_step_whose_result_fits_but_whose_call_does_not_goes_in_as_a_preview() -> None:
    from memlane.engine.governance import window
    from memlane.engine.governance.plan import Plan
    from memlane.engine.governance.structure import safe_cuts

    b = Builder("chat").system("sys").user("task")
    b.assistant("ok")
    b.call(("a", {}, "older output"))
    b.call(("b", {}, "newest output"))
    items = b.messages
    counts = [10, 10, 10, 5, 100, 5, 100]
    shrunk = [10, 10, 10, 5, 40, 5, 100]
    # the older result alone fits beside the newest step (205 <= 209), with its call it
    # does not (210): the step is kept with its result as a preview, not dropped
    chosen = window.choose(
        items, counts, safe_cuts(items), Plan(), head=3, tail_budget=209, shrunk=shrunk
    )
    assert (chosen.dropped, chosen.masked) == (3, (4,))
    whole = window.choose(
        items, counts, safe_cuts(items), Plan(), head=3, tail_budget=210, shrunk=shrunk
    )
    assert (whole.dropped, whole.masked) == (3, ())


@pytest.mark.parametrize("seed", range(6))
async def test_the_tail_stops_only_where_the_next_step_cannot_fit_even_as_previews(
    seed: int,
) -> None:
    import random

    from memlane.engine.governance.structure import safe_cuts

    rng = random.Random(seed)
    gov = governor(settings_for())
    b = Builder("chat").system("sys").user("Build the thing.")
    b.assistant("Started.")
    for step in range(80):
        if rng.random() < 0.2:
            b.user(f"step {step}: carry on")
        if rng.random() < 0.2:
            b.assistant(f"done with {step}")
        parallel = 2 if rng.random() < 0.15 else 1
        size = int(200 * 25 ** rng.random())
        b.call(*[("t", {"s": step, "k": k}, noise(size, step * 10 + k)) for k in range(parallel)])
    governed = await govern(gov, b.messages, user_text="carry on")
    stats, plan = governed.stats, governed.plan
    assert stats.dropped
    assert stats.tail_budget
    assert stats.tail_tokens <= stats.tail_budget or plan.dropped == len(b.messages) - 2
    items = b.messages
    cuts = safe_cuts(items)
    previous = max((i for i in range(plan.head, plan.dropped) if cuts[i]), default=None)
    assert previous is not None  # the tail did not simply run into the head
    cheapest = 0
    for i in range(previous, plan.dropped):
        full = gov.count(items[i])
        preview = gov._preview_count(items[i], full, PREVIEW_REFERENCE)
        cheapest += min(full, preview) if items[i].kind == "tool_result" else full
    assert stats.tail_tokens + cheapest > stats.tail_budget  # the next step could not fit
