from __future__ import annotations

import pytest

from memlane.engine.governance import loops
from memlane.engine.governance.flow import govern
from memlane.engine.governance.ledger import EVENT_LOOP, MemoryLedger
from tests.engine.governance.helpers import WIRES, Builder, WireName, governor, settings_for


def looping(wire: WireName, repeats: int) -> Builder:
    b = Builder(wire).system("sys").user("fix the build")
    for _ in range(repeats):
        b.call(("run_tests", {"path": "tests/"}, "1 failed"))
    return b


@pytest.mark.parametrize("wire", WIRES)
async def test_the_same_call_n_times_gets_a_note_and_one_event(wire: WireName) -> None:
    ledger = MemoryLedger()
    gov = governor(settings_for(governance_loop_threshold=3), ledger=ledger)
    quiet = await govern(gov, looping(wire, 2).messages, user_text="x")
    assert not any(m.origin == "note" for m in quiet.messages)
    for repeats in (3, 4):
        governed = await govern(gov, looping(wire, repeats).messages, user_text="x")
        note = governed.messages[-1]
        assert note.origin == "note"
        assert f"`run_tests` has been made {repeats} times" in note.text
    assert [e for e in ledger.events if e[0] == EVENT_LOOP] == [
        (EVENT_LOOP, {"tool": "run_tests", "count": 3}, "")
    ]


def test_different_arguments_or_a_new_user_turn_break_the_streak() -> None:
    b = looping("chat", 3)
    b.call(("run_tests", {"path": "tests/unit"}, "ok"))
    assert loops.detect(b.messages, 3) is None
    c = looping("chat", 3)
    c.user("try again")
    c.call(("run_tests", {"path": "tests/"}, "1 failed"))
    assert loops.detect(c.messages, 3) is None


def test_parallel_identical_calls_count_and_zero_disables() -> None:
    b = Builder("chat").user("go")
    b.call(*[("ping", {}, "pong")] * 3)
    loop = loops.detect(b.messages, 3)
    assert loop is not None
    assert loop.count == 3
    assert loops.detect(b.messages, 0) is None
