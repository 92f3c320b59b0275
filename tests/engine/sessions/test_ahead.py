"""A new session is made ahead of its row (`made_session`); the row is written first among
the turn's writes, in the store's writer (`write_made`), with the id the request was
shaped with, or the row another writer made first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from memlane.engine import pipeline, threads, turn_store
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import made_session, write_made
from memlane.engine.turn import Forward, Turn
from memlane.store import Store
from memlane.types import Message, Session


def turn_for(key: str, text: str = "start the ledger service") -> Turn:
    return Turn(key=key, namespace="repo", model="m", wire="chat", messages=[Message("user", text)])


@pytest.fixture
def rt(make_rt: Any) -> Iterator[Runtime]:
    runtime: Runtime = make_rt()
    yield runtime
    runtime.writes.close(timeout=10)


def held_rows(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """New sessions' rows are written (in the store's writer) only once the returned event
    is set."""
    go = threading.Event()

    def write(store: Store, session: Session) -> Session:
        assert go.wait(10), "the test never let the row be written"
        return write_made(store, session)

    monkeypatch.setattr(turn_store, "write_made", write)
    return go


def test_a_made_session_is_new_and_in_memory_only(rt: Runtime) -> None:
    made = made_session("k", "repo", "t2")
    assert (made.key, made.namespace, made.tenant) == ("k", "repo", "t2")
    assert made_session("k", "repo", "t2").id != made.id  # each turn's own, until written
    assert rt.store.find_session("k", tenant="t2") is None


def test_the_row_gets_the_id_made_ahead(rt: Runtime) -> None:
    made = made_session("new", "repo", "")
    row = write_made(rt.store, made)
    assert row.id == made.id
    found = rt.store.find_session("new")
    assert found is not None
    assert (found.id, found.namespace) == (made.id, "repo")


def test_a_row_another_writer_made_first_is_adopted(rt: Runtime) -> None:
    theirs = rt.store.ensure_session("raced", namespace="repo")
    mine = made_session("raced", "repo", "")
    assert write_made(rt.store, mine).id == theirs.id
    assert [s.id for s in rt.store.list_sessions() if s.key == "raced"] == [theirs.id]


def test_tenants_keep_their_own_rows_for_one_key(rt: Runtime) -> None:
    theirs = rt.store.ensure_session("shared-key", namespace="repo", tenant="t1")
    mine = write_made(rt.store, made_session("shared-key", "repo", "t2"))
    assert mine.id != theirs.id
    assert mine.tenant == "t2"


async def test_a_new_sessions_row_is_written_behind_its_request_with_the_id_it_was_shaped_with(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = held_rows(monkeypatch)
    turn = turn_for("brand-new")
    with threads.TRAFFIC.serving():
        prepared = await pipeline.prepare(rt, turn)
    assert isinstance(prepared, Forward)
    assert turn.session is not None
    shaped_with = turn.session.id
    assert rt.store.find_session("brand-new") is None  # not in front of the request

    go.set()
    await pipeline.stored(rt, turn)
    row = rt.store.find_session("brand-new")
    assert row is not None
    assert row.id == shaped_with == turn.session.id
    assert row.namespace == "repo"
    assert [m.message.text for m in rt.store.list_messages(row.id)] == ["start the ledger service"]


async def test_a_turn_that_went_on_without_its_sessions_stuck_row_joins_that_row(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second turn's wait for the first's writes gives up before the row is written:
    it is shaped from a session of its own made ahead, and its writes, queued behind the
    first's, adopt the first's row."""
    go = held_rows(monkeypatch)
    rt.writes.limit = 0.2
    first, second = turn_for("twice", "first"), turn_for("twice", "second")
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, first)
    with threads.TRAFFIC.serving():
        await pipeline.prepare(rt, second)
    assert first.session is not None
    assert second.session is not None
    assert first.session.id != second.session.id  # each made its own, ahead

    go.set()
    rt.writes.limit = 10
    assert await rt.writes.settled()
    rows = [s.id for s in rt.store.list_sessions() if s.key == "twice"]
    assert rows == [first.session.id]
    assert second.session.id == first.session.id  # the writes behind read the adopted row
