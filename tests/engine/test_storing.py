"""Writes queued behind a turn's own store (`engine.storing`)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.config import Settings
from memlane.engine import pipeline
from memlane.engine.runtime import Runtime
from memlane.engine.storing import after_storing
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def _turn() -> Turn:
    return Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[])


def _storing_with_a_write(done: list[str]) -> tuple[Turn, asyncio.Future[None]]:
    """A turn whose messages are being stored, with one write queued behind them."""
    turn = _turn()
    store: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    turn.storing = store
    after_storing(turn, lambda: done.append("first"))
    return turn, store


async def test_queued_writes_run_in_order_once_the_store_before_them_is_done() -> None:
    done: list[str] = []
    turn, store = _storing_with_a_write(done)
    after_storing(turn, lambda: done.append("second"))
    await asyncio.sleep(0.05)
    assert done == []
    store.set_result(None)
    await turn.storing
    assert done == ["first", "second"]


async def test_a_write_behind_a_cancelled_store_is_not_run_and_the_turn_sees_it_cancelled() -> None:
    done: list[str] = []
    turn, store = _storing_with_a_write(done)
    store.cancel()
    queued = turn.storing
    assert queued is not None
    await asyncio.wait([queued])
    assert queued.cancelled()
    assert done == []


def test_a_write_needs_a_store_to_queue_behind() -> None:
    with pytest.raises(ValueError, match="no store under way"):
        after_storing(_turn(), lambda: None)


async def test_the_next_turn_reads_once_the_writes_queued_behind_the_turn_are_stored(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    """Governance's plan and anchor are queued behind the turn's messages: the session's
    next turn reads them, so it waits for them too (`TurnOrder.incoming`)."""
    rt = Runtime(settings, sqlite_store)
    go = threading.Event()
    turn = Turn(key="s1", namespace="s1", model="m", wire="chat", messages=[Message("user", "hi")])
    await pipeline.prepare(rt, turn)
    after_storing(turn, lambda: go.wait(10) and None)
    await asyncio.sleep(0.05)  # the messages are stored by now; the queued write waits

    incoming = rt.turn_order.incoming("s1")
    assert incoming is not None
    waiting = asyncio.ensure_future(incoming)
    await asyncio.sleep(0.05)
    assert not waiting.done()
    go.set()
    await asyncio.wait_for(waiting, 5)
    assert rt.turn_order.incoming("s1") is None
