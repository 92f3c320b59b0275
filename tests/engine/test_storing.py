"""Writes queued behind a turn's own store (`engine.storing`)."""

from __future__ import annotations

import asyncio

import pytest

from memlane.engine.storing import after_storing
from memlane.engine.turn import Turn


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
