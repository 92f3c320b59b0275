"""What governance records about its own work: a context event per compaction, recall memo."""

from __future__ import annotations

from memlane.config import Settings
from memlane.engine.governance.flow import govern
from memlane.engine.governance.ledger import (
    EVENT_COMPACTED,
    EVENT_DROPPED,
    RECALL_MEMO,
    MemoryLedger,
    StoreLedger,
)
from memlane.engine.governance.report import describe_event
from memlane.engine.sessions import lifecycle
from memlane.store.sqlite import SQLiteStore
from tests.engine.governance.helpers import Builder, agentic, governor, noise, settings_for
from tests.support.text import ScriptedLLM


async def test_each_compaction_records_tokens_before_and_after_and_what_it_dropped() -> None:
    ledger = MemoryLedger()
    llm = ScriptedLLM(default="<state_snapshot>config in config/settings.toml</state_snapshot>")
    gov = governor(settings_for(), ledger=ledger, llm=llm)
    b = agentic("chat", 60)
    governed = await govern(gov, b.messages, user_text="x")
    stats = governed.stats
    events = [payload for kind, payload, _ in ledger.events if kind == EVENT_COMPACTED]
    assert len(events) == 1
    event = events[0]
    assert event["tokens_before"] == stats.tokens_in
    assert event["tokens_before"] > gov.budget.threshold
    assert event["tokens_after"] <= gov.budget.target
    assert event["limit"] == gov.budget.limit
    assert event["newly_dropped"] == stats.dropped > 0
    kinds = event["dropped_kinds"]
    assert sum(kinds.values()) == event["newly_dropped"]
    assert set(kinds) <= {"user", "assistant", "tool_call", "tool_result", "reasoning"}
    first, last = event["dropped_span"]
    assert governed.plan.head <= first <= last < governed.plan.dropped == event["dropped"]
    assert event["removed_tokens"] > 0
    assert event["stands_for"] == "summary"
    assert event["snapshot"] == governed.plan.snapshot == "config in config/settings.toml"
    assert event["tail"]["tokens"] <= event["tail"]["budget"]
    line = describe_event(event)
    assert f"{event['tokens_before']:,} -> {event['tokens_after']:,} tokens" in line
    assert f"{event['newly_dropped']} items #{first}-#{last} dropped" in line
    assert "into the summary" in line

    # a request below the threshold compacts nothing and records nothing more
    again = await govern(gov, b.messages, user_text="x")
    assert not again.stats.compacted
    assert [k for k, _, _ in ledger.events].count(EVENT_COMPACTED) == 1


async def test_a_compaction_that_only_masks_says_so() -> None:
    ledger = MemoryLedger()
    settings = settings_for(governance_compact_threshold=0.25, governance_compact_target=0.2)
    gov = governor(settings, ledger=ledger)
    b = Builder("chat").system("sys").user("task")
    b.call(("grep", {"q": "x"}, noise(6_000, 1)))
    b.assistant("found it")
    for step in range(3):
        b.call(("ls", {"n": step}, noise(800, step)))
    governed = await govern(gov, b.messages, user_text="task")
    (event,) = [payload for kind, payload, _ in ledger.events if kind == EVENT_COMPACTED]
    assert event["masked"]["items"] == governed.stats.masked == 1
    assert event["masked"]["tokens_saved"] > 1_000
    assert event["newly_dropped"] == 0
    assert event["stands_for"] == "none"
    assert event["snapshot"] == ""
    assert event["tokens_after"] == event["tokens_before"] - event["masked"]["tokens_saved"]
    assert "1 tool output masked" in describe_event(event)


def test_a_recall_is_remembered_for_its_version_and_forgotten_with_the_session(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    session = sqlite_store.ensure_session("memo")
    ledger = StoreLedger(settings, sqlite_store, session.id, session.key, files=True)
    sqlite_store.add_event(session.id, EVENT_DROPPED, {}, text="user: the walrus lives in a.toml")
    first = ledger.recall("where does the walrus live", 8, 400, version="v1")
    assert [s.text for s in first] == ["user: the walrus lives in a.toml"]
    sqlite_store.add_event(session.id, EVENT_DROPPED, {}, text="user: another walrus in b.toml")
    # same version: the dropped history has not changed as far as the plan knows
    assert ledger.recall("where does the walrus live", 8, 400, version="v1") == first
    assert len(ledger.recall("where does the walrus live", 8, 400, version="v2")) == 2
    assert len(ledger.recall("where does the walrus live", 8, 400)) == 2  # no version: no memo
    RECALL_MEMO.forget(session.id)
    assert len(ledger.recall("where does the walrus live", 8, 400, version="v1")) == 2
    lifecycle.delete(sqlite_store, settings, session)  # deleted means gone, memo included
    assert ledger.recall("where does the walrus live", 8, 400, version="v1") == []
