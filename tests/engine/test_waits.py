"""A request's wait on memlane's own work ends at `request_wait_seconds`; the work goes on."""

from __future__ import annotations

import asyncio

import pytest

from memlane.config import Settings
from memlane.engine import waits
from memlane.engine.failopen import EVENT
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.store.sqlite import SQLiteStore
from memlane.types import Message


def runtime(settings: Settings, store: SQLiteStore) -> Runtime:
    return Runtime(settings.model_copy(update={"request_wait_seconds": 0.05}), store)


def stored_turn(rt: Runtime) -> Turn:
    session = rt.store.ensure_session("k")
    return Turn("k", "k", "m", "chat", [Message("user", "hi")], session=session)


async def test_work_done_in_time_gives_its_result(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store)
    assert await waits.within(rt, None, "a store write", asyncio.sleep(0, "stored"), "late") == (
        "stored"
    )
    assert "wait" not in rt.activity.snapshot()["failures"]


async def test_an_overrun_gives_the_fallback_and_the_work_goes_on(
    settings: Settings, sqlite_store: SQLiteStore
) -> None:
    rt = runtime(settings, sqlite_store)
    turn = stored_turn(rt)
    finished = asyncio.Event()

    async def slow_write() -> str:
        await asyncio.sleep(0.2)
        finished.set()
        return "stored"

    assert await waits.within(rt, turn, "a store write", slow_write(), "late") == "late"
    assert not finished.is_set()
    await asyncio.wait_for(finished.wait(), 5)  # not cancelled
    # recorded beside the request, not in front of it
    failures = rt.activity.snapshot()["failures"]
    assert failures["wait"]["count"] == 1
    assert "a store write took longer than 0.05 s" in failures["wait"]["last"]
    assert turn.session is not None
    (event,) = sqlite_store.list_events(turn.session.id, kind=EVENT)
    assert event.payload["stage"] == waits.STAGE


async def test_work_that_fails_after_its_request_went_on_is_logged(
    settings: Settings, sqlite_store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    rt = runtime(settings, sqlite_store)

    async def failing_late() -> None:
        await asyncio.sleep(0.1)
        raise RuntimeError("disk full")

    await waits.within(rt, None, "a store write", failing_late(), None)
    await asyncio.sleep(0.2)
    assert "a store write failed after its request went on" in caplog.text
    assert "disk full" in caplog.text
