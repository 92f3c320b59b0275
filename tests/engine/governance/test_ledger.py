"""Dropped history is found by the words around it, as a remembered turn is."""

from __future__ import annotations

from pathlib import Path

from memlane.config import Settings
from memlane.engine.governance.ledger import EVENT_DROPPED, Ledger, MemoryLedger, StoreLedger
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message

DROPPED = [
    (0, Message("user", "Did the flamingo build pass on the release branch?")),
    (1, Message("assistant", "Yes, on Tuesday.")),
    (2, Message("user", "Then tag it")),
    (3, Message("assistant", "Tagged v1.4 and pushed the changelog")),
    (4, Message("user", "Ask Nadia to announce the release")),
]
# more history, so that words in three items are rare enough to count (BM25's idf)
TOPICS = ["lint", "docs", "cache", "parser", "logging", "fixtures", "timeouts", "retries"]
DROPPED += [
    (5 + i, Message("user", f"Next, clean up the {t} module")) for i, t in enumerate(TOPICS)
]


def _recalled(ledger: Ledger) -> list[str]:
    ledger.record_dropped(DROPPED)
    return [s.text for s in ledger.recall("when did the flamingo build pass", 5, 400)]


def test_a_dropped_answer_is_found_by_the_question_before_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        session = store.ensure_session("s")
        ledger = StoreLedger(Settings(home=tmp_path), store, session.id, "s", files=True)
        found = _recalled(ledger)
        # the answer holds none of the question's words: its neighbour's count for it
        assert "assistant: Yes, on Tuesday." in found
        assert found[0].startswith("user: Did the flamingo build pass")  # its own words first
        assert not any("Nadia" in text for text in found)  # three items on: out of reach
        shown = [e.text for e in store.list_events(session.id, kind=EVENT_DROPPED)]
        assert "assistant: Yes, on Tuesday." in shown  # what is shown is the item alone
    finally:
        store.close()


def test_the_library_ledger_finds_dropped_items_the_same_way() -> None:
    found = _recalled(MemoryLedger())
    assert "assistant: Yes, on Tuesday." in found
    assert not any("Nadia" in text for text in found)
