"""The proxy learns how soon clients come back after an answer (`engine.pace`)."""

from __future__ import annotations

import pytest

from memlane.engine import pace
from memlane.engine.pace import ClientPace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(pace.time, "monotonic", clock)
    return clock


def back_after(paced: ClientPace, clock: Clock, key: str, ms: float) -> None:
    paced.answered(key)
    clock.now += ms / 1000
    paced.arrived(key)


def test_clients_are_unhurried_until_one_comes_back_at_once(clock: Clock) -> None:
    paced = ClientPace()
    assert paced.unhurried  # nothing learnt: answers go ahead of their store
    paced.arrived("new")  # a first request has no answer before it: nothing learnt
    assert paced.unhurried
    back_after(paced, clock, "a", 1.0)
    assert not paced.unhurried


def test_the_median_of_recent_pauses_decides(clock: Clock) -> None:
    paced = ClientPace()
    for ms in (40.0, 2.0, 50.0):  # one quick return among unhurried ones
        back_after(paced, clock, "a", ms)
    assert paced.unhurried
    for _ in range(pace.PAUSES_KEPT):  # then only quick ones: the old pauses age out
        back_after(paced, clock, "b", 1.0)
    assert not paced.unhurried
    for _ in range(pace.PAUSES_KEPT // 2 + 1):
        back_after(paced, clock, "c", pace.UNHURRIED_MS + 1)
    assert paced.unhurried


def test_sessions_that_never_come_back_do_not_grow_the_table(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pace, "ANSWERS_KEPT", 3)
    paced = ClientPace()
    for key in ("a", "b", "c", "d"):
        paced.answered(key)
    clock.now += 0.001
    paced.arrived("a")  # forgotten: the oldest of four
    assert paced.unhurried
    paced.arrived("d")
    assert not paced.unhurried
