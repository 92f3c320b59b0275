"""Several writes as one transaction: what one turn stores is one commit.

Run once per backend (`tests/store/conftest.py`). What another thread sees stands for
what any other connection (another request, another worker) sees.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memlane.store import SessionNotFound, Store
from tests.store.contract.support import assistant, texts, user


def elsewhere(fn: Any, *args: Any) -> Any:
    """`fn(*args)` on another thread: another connection, outside this one's transaction."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def test_writes_inside_a_transaction_are_seen_together_once_it_ends(store: Store) -> None:
    session = store.ensure_session("s")
    with store.transaction():
        store.append_messages(session.id, [user("hello"), assistant("hi")])
        store.add_usage(session.id, prompt_tokens=5, completion_tokens=2)
        store.add_event(session.id, "turn", {"status": "ok"})
        store.add_daily_counts("2026-01-02", {"requests": 1})
        assert texts(store, session.id) == ["hello", "hi"]  # this thread sees its writes
        assert elsewhere(texts, store, session.id) == []  # nobody else does yet
        assert elsewhere(store.list_events, session.id) == []
    assert elsewhere(texts, store, session.id) == ["hello", "hi"]
    stored = elsewhere(store.get_session, session.id)
    assert (stored.prompt_tokens, stored.completion_tokens) == (5, 2)
    assert [e.kind for e in elsewhere(store.list_events, session.id)] == ["turn"]
    assert store.daily_counts(since="2026-01-01") == {"2026-01-02": {"requests": 1}}


def test_a_write_that_fails_inside_undoes_only_itself(store: Store) -> None:
    session = store.ensure_session("s")
    with store.transaction():
        store.append_messages(session.id, [user("kept")])
        with pytest.raises(SessionNotFound):
            store.add_usage("no-such-session", prompt_tokens=1)
        store.add_event(session.id, "turn", {"status": "ok"})
    assert texts(store, session.id) == ["kept"]
    assert [e.kind for e in store.list_events(session.id)] == ["turn"]


def test_an_error_out_of_the_transaction_undoes_all_of_it(store: Store) -> None:
    session = store.ensure_session("s")

    class Stop(Exception):
        pass

    def turn() -> None:
        with store.transaction():
            store.append_messages(session.id, [user("lost")])
            store.add_event(session.id, "turn", {"status": "ok"})
            raise Stop

    with pytest.raises(Stop):
        turn()
    assert texts(store, session.id) == []
    assert store.list_events(session.id) == []
    store.append_messages(session.id, [user("after")])  # the store is usable after
    assert texts(store, session.id) == ["after"]
