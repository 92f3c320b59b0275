"""What the keyword index reads for a turn: its date, its words, its neighbours' words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlane.store.documents import turn_documents
from memlane.types import Fact


def _turns(*texts: str) -> list[Fact]:
    start = datetime(2024, 5, 8, 9, 0, tzinfo=UTC)
    return [
        Fact(
            id=f"t{i}",
            scope="conv:c",
            conversation_id="c",
            role=("user", "assistant")[i % 2],
            text=text,
            created_at=start + timedelta(minutes=i),
            updated_at=start + timedelta(minutes=i),
        )
        for i, text in enumerate(texts)
    ]


def test_a_turn_document_holds_its_date_its_words_twice_and_unlabelled_neighbours() -> None:
    turns = _turns("Ann: one", "Bob: two", "Ann: three", "Bob: four", "Ann: five")
    documents = turn_documents(turns)
    assert documents["t3"].split("\n") == [
        "8 May 2024",
        "Bob: four",
        "Bob: four",
        "two",  # two turns before, oldest first, without their speaker labels
        "three",
        "five",  # one turn after
    ]
    assert documents["t0"].split("\n") == ["8 May 2024", "Ann: one", "Ann: one", "two"]


def test_the_window_and_weight_can_be_chosen_for_measuring() -> None:
    turns = _turns("Ann: one", "Bob: two", "Ann: three")
    alone = turn_documents(turns, before=0, after=0, weight=1)
    assert alone["t1"].split("\n") == ["8 May 2024", "Bob: two"]
    wide = turn_documents(turns, before=1, after=1, weight=3)
    assert wide["t1"].split("\n") == ["8 May 2024", *["Bob: two"] * 3, "one", "three"]
