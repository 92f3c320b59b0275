"""Acting on memories whose code moved on: list them, check one, confirm it as it is now.

What the CLI (`memlane memory stale`, `memlane memory verify`) and the other faces call.
These run outside any request, so they ask git for renames at once (a subprocess), where
recall leaves that to the background (`engine.memory.stale`).

Confirming a memory records its cited files as they are now (a moved file under its new
path, a deleted one dropped) with today's HEAD: a person checked the memory still holds,
so recall stops flagging it until the code moves on again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from memlane.engine import threads
from memlane.engine.memory.manage import get_memory
from memlane.engine.memory.stale import ProjectChecks, Staleness
from memlane.engine.runtime import Runtime
from memlane.files import project
from memlane.files.memory_files import now_utc
from memlane.types import Citations, CitedFile, Fact


async def stale_memories(rt: Runtime, *, folder: str | None = None) -> list[tuple[Fact, Staleness]]:
    """Live memories (of the project at `folder`, else every project) whose cited files
    changed, moved or are gone, oldest first."""
    return await threads.to_thread(_stale, rt, folder)


def _stale(rt: Runtime, folder: str | None) -> list[tuple[Fact, Staleness]]:
    root = str(Path(folder).expanduser().resolve()) if folder else None
    facts = [
        f
        for f in rt.store.list_facts(roles=("memory", "user", "assistant"))
        if f.cites is not None and f.valid_to is None and (root is None or f.cites.root == root)
    ]
    checked = [(fact, check_now(rt, fact)) for fact in facts]
    return [(fact, status) for fact, status in checked if status.stale]


def check_now(rt: Runtime, fact: Fact) -> Staleness:
    """`fact`'s cited files now, git's renames asked at once when a file is missing."""
    checks = rt.project_checks
    status = checks.check(fact)
    if any(f.status == "deleted" for f in status.files) and checks.fill_renames():
        status = checks.check(fact)
    return status


async def verify_memory(rt: Runtime, ref: str, *, confirm: bool = False) -> tuple[Fact, Staleness]:
    """Memory `ref` and its cited files now; with `confirm`, their current state recorded
    as the memory's (written, committed), and the memory checked again."""
    fact = await get_memory(rt, ref)
    status = await threads.to_thread(check_now, rt, fact)
    if not confirm or fact.cites is None or status.status == "unchecked":
        return fact, status
    book = rt.memory_book
    await book.ready()
    confirmed = await threads.to_thread(confirmed_cites, rt, fact, status)
    await book.adopt([fact])
    fact = replace(fact, cites=confirmed, updated_at=now_utc())
    await book.write(puts=[fact])
    await book.commit(f"memory: confirmed the files {fact.id} cites as they are now")
    return fact, await threads.to_thread(check_now, rt, fact)


def confirmed_cites(rt: Runtime, fact: Fact, status: Staleness) -> Citations | None:
    """The cited files as they are now: changed ones with today's content, moved ones at
    their new path, deleted ones dropped; None when none is left."""
    assert fact.cites is not None
    root = Path(fact.cites.root)
    kept: list[CitedFile] = []
    for was, now in zip(fact.cites.files, status.files, strict=False):
        if now.status == "deleted":
            continue
        path = now.moved_to or was.path
        blob = rt.project_checks.identity(root, path, was.blob)
        if blob is not None:
            kept.append(CitedFile(path, blob))
    if not kept:
        return None
    return Citations(fact.cites.root, tuple(kept), now_utc(), project.read_head(root))


async def checked(
    rt: Runtime, facts: Sequence[Fact], *, budget: int | None = None
) -> dict[str, Staleness]:
    """The facts' cited files checked now as recall checks them (`memory_cites`, at most
    `budget` files, by default `memory_cites_per_recall`; git's renames asked later): for
    a face's results."""
    if not rt.settings.memory_cites or not any(f.cites for f in facts):
        return {}
    budget = rt.settings.memory_cites_per_recall if budget is None else budget
    found = await threads.to_thread(rt.project_checks.check_all, facts, budget=budget)
    renames_later(rt)
    return found


def renames_later(rt: Runtime) -> None:
    """Ask git, in the background, for the renames a check needed (a missing cited file
    may have moved): the next check shows the new path. One lookup is planned at a time:
    every recall while a pair is wanted calls this, and a busy background would otherwise
    hold a job per recall, each asking for what the first one asks."""
    checks = rt.project_checks
    if not (rt.settings.memory_cites and checks.wanted) or checks.lookup_planned:
        return
    checks.lookup_planned = True
    if not rt.background.spawn(_fill_renames(checks), name="memory-cites-renames"):
        checks.lookup_planned = False  # dropped: the pair stays wanted, the next recall asks


async def _fill_renames(checks: ProjectChecks) -> None:
    try:
        await threads.to_thread(checks.fill_renames)
    finally:
        checks.lookup_planned = False
