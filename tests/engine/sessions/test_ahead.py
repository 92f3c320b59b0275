"""A new session is made ahead of its row; the row is written behind its first request."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from memlane.engine import pipeline, threads
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.ahead import SessionsAhead
from memlane.engine.turn import Forward, Turn
from memlane.store import Store
from memlane.types import Message, Session


def turn_for(key: str, text: str = "start the ledger service") -> Turn:
    return Turn(key=key, namespace="repo", model="m", wire="chat", messages=[Message("user", text)])


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """This request is the one in memlane's hands (it is shaped on the loop)."""
    with threads.TRAFFIC.serving():
        yield


def held_writes(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Rows are written only once the returned event is set."""
    go = threading.Event()

    def write(store: Store, session: Session) -> Session:
        assert go.wait(10), "the test never let the row be written"
        return SessionsAhead.write(store, session)

    monkeypatch.setattr(rt.sessions_ahead, "write", write)
    return go


def test_turns_of_one_new_session_share_what_was_made_until_it_is_forgotten() -> None:
    ahead = SessionsAhead()
    first = ahead.made("k", namespace="repo", tenant="")
    assert ahead.made("k", namespace="other", tenant="") is first
    assert ahead.made("k", namespace="repo", tenant="t2").id != first.id  # tenants apart
    assert (first.key, first.namespace, first.tenant) == ("k", "repo", "")

    ahead.forget(first)
    again = ahead.made("k", namespace="repo", tenant="")
    assert again.id != first.id
    ahead.forget(first)  # a stale session does not drop the one made since
    assert ahead.made("k", namespace="repo", tenant="") is again


def test_the_row_gets_the_id_made_ahead_unless_another_writer_made_it_first(
    rt: Runtime,
) -> None:
    ahead = SessionsAhead()
    made = ahead.made("new", namespace="repo", tenant="")
    assert SessionsAhead.write(rt.store, made).id == made.id
    assert rt.store.find_session("new") is not None

    theirs = rt.store.ensure_session("raced", namespace="repo")
    mine = ahead.made("raced", namespace="repo", tenant="")
    assert SessionsAhead.write(rt.store, mine).id == theirs.id


async def test_a_new_sessions_row_is_written_behind_its_request_with_the_id_it_was_shaped_with(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = held_writes(rt, monkeypatch)
    turn = turn_for("brand-new")
    with alone():
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
    assert len(rt.sessions_ahead) == 0


async def test_a_second_turn_before_the_row_is_written_joins_the_same_session(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = held_writes(rt, monkeypatch)
    rt.turn_order.limit = 1.0  # the second turn's wait for the first gives up before the row
    first, second = turn_for("twice", "first"), turn_for("twice", "second")
    with alone():
        await pipeline.prepare(rt, first)
    with alone():
        await pipeline.prepare(rt, second)
    assert first.session is not None
    assert second.session is not None
    assert first.session.id == second.session.id

    go.set()
    await pipeline.stored(rt, first)
    await pipeline.stored(rt, second)
    sessions = rt.store.list_sessions()
    assert [s.id for s in sessions if s.key == "twice"] == [first.session.id]


async def test_a_new_session_whose_request_is_never_shaped_is_forgotten(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(rt: Runtime, turn: Turn) -> object:
        raise RuntimeError("shaping failed")

    monkeypatch.setattr(pipeline, "shape", broken)
    with alone(), pytest.raises(RuntimeError):
        await pipeline.prepare(rt, turn_for("never-shaped"))
    assert len(rt.sessions_ahead) == 0
    assert rt.store.find_session("never-shaped") is None
