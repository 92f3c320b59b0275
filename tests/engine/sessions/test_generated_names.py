"""Names indexing generates stay distinct in a namespace, read from the store once."""

from __future__ import annotations

from typing import Any

import pytest

from memlane.engine.sessions.generated_names import generated_name
from memlane.engine.sessions.naming import NAME_PINNED
from memlane.store.documents import NAME_NUMBERED, session_doc
from memlane.store.sqlite import SQLiteStore
from memlane.types import Session
from tests.engine.sessions.conftest import chat


def named(store: SQLiteStore, session: Session, name: str) -> Session:
    """What indexing stores: the name `generated_name` chose, and whether it is numbered."""
    chosen, numbered = generated_name(store, session, name)
    metadata = {**session.metadata, "name": chosen, NAME_NUMBERED: numbered}
    return store.update_session(session.id, metadata=metadata)


def test_a_generated_name_another_session_shows_gets_the_next_free_one(
    sqlite_store: SQLiteStore,
) -> None:
    """A model names two sessions of one topic alike: `@@queue-design` must still find one."""
    first = named(sqlite_store, chat(sqlite_store, "a", ["x"]), "queue-design")
    second = named(sqlite_store, chat(sqlite_store, "b", ["x"]), "queue-design")
    third = named(sqlite_store, chat(sqlite_store, "c", ["x"]), "Queue-Design")
    elsewhere = chat(sqlite_store, "d", ["x"], namespace="/other/repo")

    assert [s.metadata["name"] for s in (first, second, third)] == [
        "queue-design",
        "queue-design-2",
        "Queue-Design-3",
    ]
    assert generated_name(sqlite_store, elsewhere, "queue-design") == ("queue-design", False)
    assert generated_name(sqlite_store, chat(sqlite_store, "e", ["x"]), "a") == ("a-2", True)


def test_names_are_read_once_and_a_session_keeps_its_own(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading every session on each index cost 16% of req/s under 200 clients: the names
    are read the first time one is needed, then kept in step with the ones given out."""
    chat(sqlite_store, "old", ["x"], name="billing")
    session = chat(sqlite_store, "new", ["x"])
    session = named(sqlite_store, session, "billing")
    assert session.metadata["name"] == "billing-2"

    def no_more(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sessions were read again")

    monkeypatch.setattr(sqlite_store, "list_sessions", no_more)
    assert generated_name(sqlite_store, session, "billing") == ("billing-2", True)  # its own
    session = named(sqlite_store, session, "invoices")  # a new topic: the old name goes
    other = named(sqlite_store, chat(sqlite_store, "third", ["x"]), "billing-2")
    assert (session.metadata["name"], other.metadata["name"]) == ("invoices", "billing-2")


def test_a_name_a_person_gave_stays(sqlite_store: SQLiteStore) -> None:
    session = chat(sqlite_store, "k", ["x"], name="mine", **{NAME_PINNED: True})
    assert generated_name(sqlite_store, session, "something-else") == ("mine", False)


def test_a_numbered_name_is_indexed_without_its_number(sqlite_store: SQLiteStore) -> None:
    """`queue-design-7` in a session's summary document would match every question that
    says 7 (under `load.py`, whose sessions are all named alike, recall's search went from
    12% to 30% of the event loop): the document says the model's name."""
    first = chat(sqlite_store, "a", ["x"], name="fix-issue-42", summary="the first")
    other = chat(sqlite_store, "b", ["x"], summary="the second")
    numbered = named(sqlite_store, other, "fix-issue-42")
    assert numbered.metadata["name"] == "fix-issue-42-2"

    assert session_doc(first) is not None
    assert session_doc(numbered) is not None
    assert "fix-issue-42\n" in session_doc(first)[1]  # a model's own number stays
    assert session_doc(numbered)[1].startswith("fix-issue-42\n")
