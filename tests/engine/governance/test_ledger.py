"""Dropped history is found by the words around it, as a remembered turn is."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memlane.config import Settings
from memlane.engine.governance.flow import recall_snippets
from memlane.engine.governance.ledger import EVENT_DROPPED, Ledger, MemoryLedger, StoreLedger
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message
from tests.engine.governance.helpers import governor, settings_for

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


async def test_a_store_ledger_searches_off_the_event_loop_and_remembers_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the search is a round trip, and with the server gone a wait of up to
    the pool's 30 s: on the event loop it held every request of the process."""
    store = SQLiteStore(tmp_path / "memlane.db")
    try:
        session = store.ensure_session("s")
        ledger = StoreLedger(Settings(home=tmp_path), store, session.id, "s", files=True)
        ledger.record_dropped(DROPPED)
        gov = governor(settings_for(tmp_path), ledger=ledger)
        loop_thread = threading.get_ident()
        searched_on: list[int] = []
        search = store.keyword_search

        def watched(*args: Any, **kwargs: Any) -> Any:
            searched_on.append(threading.get_ident())
            return search(*args, **kwargs)

        monkeypatch.setattr(store, "keyword_search", watched)
        query = "when did the flamingo build pass"

        first = await recall_snippets(gov, query, None, version="anchor-1")
        again = await recall_snippets(gov, query, None, version="anchor-1")

        assert any("Yes, on Tuesday." in s.text for s in first)
        assert [s.text for s in again] == [s.text for s in first]
        assert len(searched_on) == 1  # the second answer was remembered
        assert searched_on[0] != loop_thread
    finally:
        store.close()
