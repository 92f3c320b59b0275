from __future__ import annotations

import pytest

from memlane.engine.governance.structure import first_run_end, safe_cuts
from tests.engine.governance.helpers import WIRES, Builder, WireName


@pytest.mark.parametrize("wire", WIRES)
def test_parallel_calls_are_never_split_from_their_results(wire: WireName) -> None:
    b = Builder(wire).user("go")
    b.reasoning("two lookups at once")
    b.call(("a", {}, "one"), ("b", {}, "two"), ("c", {}, "three"))
    b.assistant("done")
    items = b.messages
    cuts = safe_cuts(items)
    first_call = next(i for i, m in enumerate(items) if m.tool_calls)
    last_result = max(i for i, m in enumerate(items) if m.kind == "tool_result")
    assert all(not cuts[i] for i in range(first_call + 1, last_result + 1))
    assert cuts[last_result + 1]
    assert cuts[1]
    if wire == "responses":  # the reasoning item stays with the calls it precedes
        assert items[1].kind == "reasoning"
        assert not cuts[2]


def test_a_result_without_its_call_is_never_first() -> None:
    b = Builder("chat").user("go")
    b.items.append({"role": "tool", "tool_call_id": "ghost", "content": "orphan"})
    b.assistant("ok")
    cuts = safe_cuts(b.messages)
    assert cuts[1] is False
    assert cuts[2] is True


@pytest.mark.parametrize("wire", WIRES)
def test_the_head_spans_the_whole_first_run_up_to_its_text_answer(wire: WireName) -> None:
    b = Builder(wire).system("sys").user("task")
    b.call(("ls", {}, "a b"))
    b.call(("cat", {"f": "a"}, "content"))
    b.assistant("first answer")
    b.user("more")
    items = b.messages
    end = first_run_end(items, safe_cuts(items))
    assert items[end - 1].text == "first answer"
    assert items[end].text == "more"


@pytest.mark.parametrize("wire", WIRES)
def test_a_first_run_made_only_of_tool_calls_keeps_instructions_and_the_task(
    wire: WireName,
) -> None:
    b = Builder(wire).system("sys").user("task")
    for step in range(5):
        b.call(("step", {"n": step}, "out"))
    items = b.messages
    assert first_run_end(items, safe_cuts(items)) == 2
