"""`MemoryBook.scope_lock`: one reconciliation per scope at a time, and no lock kept per
scope (a proxy meets a new conversation scope with every session)."""

from __future__ import annotations

import asyncio
import gc

from memlane.engine.memory.book import MemoryBook
from memlane.files.locks import SCOPE_LOCKS, STRIPES, HomeLock


def _stripe(book: MemoryBook, scope: str) -> str:
    return HomeLock.striped(book.rt.settings.home_path, SCOPE_LOCKS, scope).path.name


async def test_two_reconciliations_of_one_scope_take_turns(book: MemoryBook) -> None:
    order: list[str] = []
    first_in = asyncio.Event()

    async def first() -> None:
        async with book.scope_lock("ns:app"):
            order.append("first in")
            first_in.set()
            await asyncio.sleep(0.05)
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with book.scope_lock("ns:app"):
            order.append("second in")

    await asyncio.gather(first(), second())
    assert order == ["first in", "first out", "second in"]


async def test_scopes_of_different_stripes_do_not_wait_for_each_other(book: MemoryBook) -> None:
    other = next(
        f"conv:{n}" for n in range(1000) if _stripe(book, f"conv:{n}") != _stripe(book, "ns:app")
    )
    async with book.scope_lock("ns:app"):
        async with asyncio.timeout(5):
            async with book.scope_lock(other):
                pass


def _asyncio_locks() -> int:
    return sum(isinstance(o, asyncio.Lock) for o in gc.get_objects())


async def test_a_process_keeps_no_lock_per_scope(book: MemoryBook) -> None:
    async with book.scope_lock("conv:warm-up"):
        pass
    before = _asyncio_locks()
    for n in range(500):
        async with book.scope_lock(f"conv:session-{n}"):
            pass
    assert _asyncio_locks() - before <= STRIPES
