"""Writes queued to the store's writer, held back until the test releases them.

Blocking a write inside the writer would hold the store's write lock, and every other
writer with it; holding the queue instead shows what a request does before its writes
run, with the store free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memlane.engine.runtime import Runtime


class HeldWrites:
    def __init__(self, submit: Callable[..., None]) -> None:
        self.submit = submit
        self.held: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.holding = True

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.holding:
            self.held.append((args, kwargs))
        else:
            self.submit(*args, **kwargs)

    def release(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        for args, kwargs in held:
            self.submit(*args, **kwargs)


def held_writes(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> HeldWrites:
    """Hold every write `rt` queues from now on until `release()`."""
    held = HeldWrites(rt.writes.writer.submit)
    monkeypatch.setattr(rt.writes.writer, "submit", held)
    return held
