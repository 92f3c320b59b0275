"""A session's next turn waits for its earlier answers to be stored; other sessions do not."""

from __future__ import annotations

import asyncio

import pytest

from memlane.engine import turnorder
from memlane.engine.turnorder import Hold, TurnOrder


async def test_the_next_turn_of_a_session_waits_for_its_held_answer() -> None:
    order = TurnOrder()
    release = order.hold("a")
    waiting = asyncio.create_task(order.settled("a"))
    other = asyncio.create_task(order.settled("b"))
    await asyncio.sleep(0.01)
    assert other.done()  # another session never waits
    assert not waiting.done()
    release()
    await asyncio.wait_for(waiting, 1)
    assert order.holding == 0


async def test_a_turn_holding_its_session_waits_for_the_turns_before_it_not_for_itself() -> None:
    order = TurnOrder()
    before = order.hold("a")
    earlier = order.behind("a")
    own = order.hold("a")
    waiting = asyncio.ensure_future(earlier)
    await asyncio.sleep(0.01)
    assert not waiting.done()
    before()
    await asyncio.wait_for(waiting, 1)  # its own hold is not waited for
    assert order.holding == 1
    own()


async def test_a_wait_for_every_session_waits_for_all_held_answers() -> None:
    order = TurnOrder()
    first, second = order.hold("a"), order.hold("b")
    waiting = asyncio.create_task(order.settled())
    first()
    await asyncio.sleep(0.01)
    assert not waiting.done()
    second()
    await asyncio.wait_for(waiting, 1)


async def test_two_answers_of_one_session_are_both_waited_for() -> None:
    order = TurnOrder()
    first, second = order.hold("a"), order.hold("a")
    assert order.holding == 2
    first()
    first()  # releasing twice is harmless
    assert order.holding == 1
    waiting = asyncio.create_task(order.settled("a"))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    second()
    await asyncio.wait_for(waiting, 1)
    assert order.holding == 0


async def test_a_hold_never_released_delays_the_next_turn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order = TurnOrder(limit=0.05)
    order.hold("a")
    assert order.holding == 1
    assert await asyncio.wait_for(order.settled("a"), 1) is False  # the wait gave up
    await asyncio.sleep(0.1)  # and the hold itself has expired
    assert order.holding == 0
    assert order.expired == 1
    assert "without releasing it; released" in caplog.text
    assert await asyncio.wait_for(order.settled("a"), 1) is True  # later turns do not wait


async def test_a_hold_released_in_time_does_not_expire() -> None:
    order = TurnOrder(limit=0.05)
    order.hold("a")()
    await asyncio.sleep(0.1)
    assert order.expired == 0


def held_answer(monkeypatch: pytest.MonkeyPatch, grace: float) -> tuple[TurnOrder, Hold]:
    """Session "a" holding one answer, whose storing may be put off for `grace` seconds."""
    monkeypatch.setattr(turnorder, "ANSWER_GRACE_SECONDS", grace)
    order = TurnOrder()
    return order, order.hold("a")


async def test_an_answer_put_off_is_stored_once_a_turn_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order, answer = held_answer(monkeypatch, 30)
    put_off = asyncio.create_task(answer.wanted_within())
    storing_behind = asyncio.ensure_future(order.behind("a", hurry=False))
    order.hurry("b")  # another session's turn asks for its own answers only
    await asyncio.sleep(0.01)
    assert not put_off.done()  # a turn storing behind it does not ask for it
    waiting = asyncio.create_task(order.settled("a"))  # a turn that reads it does
    await asyncio.wait_for(put_off, 1)
    answer()
    await asyncio.wait_for(asyncio.gather(waiting, storing_behind), 1)


async def test_an_answer_put_off_is_stored_after_the_grace_when_no_turn_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order, answer = held_answer(monkeypatch, 0.05)
    await asyncio.wait_for(answer.wanted_within(), 1)
    assert order.holding == 1  # asked for: the caller stores it, then releases it
    later = order.hold("a")
    order.hurry("a")
    await asyncio.wait_for(later.wanted_within(), 0.04)  # asked for already: at once


async def test_the_next_turn_reads_once_the_messages_before_it_are_stored() -> None:
    """Not once their answer is: it may be put off until that turn has gone upstream."""
    order = TurnOrder()
    assert order.incoming("a") is None  # nothing being stored: nothing to await
    put_off = order.hold("a")  # an answer before them, put off
    assert order.incoming("a") is None  # an answer alone is not what a turn reads
    messages = order.hold("a", messages=True)
    answer = order.hold("a")  # their own answer, held after them
    assert order.holding == 2  # answers only
    assert order.incoming("b") is None  # another session never waits
    incoming = order.incoming("a")
    assert incoming is not None
    waiting = asyncio.ensure_future(incoming)
    await asyncio.sleep(0.01)
    assert not waiting.done()
    assert put_off.wanted.is_set()  # the messages are stored behind it: it is asked for
    put_off()
    messages()
    await asyncio.wait_for(waiting, 1)  # not waiting for the answer held after them
    assert not answer.done.is_set()
    assert order.incoming("a") is None
    answer()
    assert order.holding == 0
