"""Recall checks the files its memories cite: what changed is said, what is gone ranks last."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from memlane.engine.memory import manage
from memlane.engine.memory.book import MemoryBook
from memlane.engine.memory.cites import note
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.recall import recall
from memlane.engine.runtime import Runtime
from memlane.files.memory_files import now_utc
from memlane.types import Fact
from tests.support.gitrepo import git, make_repo


def cited(repo: Path, fact_id: str, text: str, age: int) -> Fact:
    fact = new_fact(
        scope=f"ns:{repo}",
        conversation_id="s1",
        role="memory",
        text=text,
        fact_id=fact_id,
        created_at=now_utc() - timedelta(minutes=age),
    )
    return note(fact, repo)


async def test_a_fact_whose_file_is_gone_ranks_below_current_ones(
    rt: Runtime, book: MemoryBook, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"deploy/old.sh": "old\n", "deploy/new.sh": "new\n"})
    old = cited(repo, "f-old", "Deploys run deploy/old.sh on the deploy host", age=1)
    new = cited(repo, "f-new", "Deploys run deploy/new.sh for the deploy host", age=5)
    await book.write(puts=[old, new], new={old.id, new.id})
    found = await recall(rt, "how do deploys run", scopes=[old.scope])
    assert [r.fact.id for r in found if r.fact] == ["f-old", "f-new"]  # the newer first

    git(repo, "rm", "-q", "deploy/old.sh")
    git(repo, "commit", "-qm", "drop the old script")
    found = await recall(rt, "how do deploys run", scopes=[old.scope])
    assert [r.fact.id for r in found if r.fact] == ["f-new", "f-old"]
    assert found[0].label == "memory"
    day = old.cites.noted_at.date().isoformat()  # type: ignore[union-attr]
    commits = f"{old.cites.head[:7]}..{git(repo, 'rev-parse', 'HEAD')[:7]}"  # type: ignore[union-attr,index]
    assert found[1].label == (
        f"memory, stale, noted {day}; deploy/old.sh has been deleted since ({commits})"
    )


async def test_with_checks_off_nothing_is_recorded_nor_checked(
    rt: Runtime, book: MemoryBook, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n"})
    fact = cited(repo, "f1", "The entry point is a.py", age=1)
    await book.write(puts=[fact], new={fact.id})
    (repo / "a.py").write_text("changed\n")
    rt.settings = rt.settings.model_copy(update={"memory_cites": False})
    found = await recall(rt, "entry point", scopes=[fact.scope])
    assert [r.label for r in found] == ["memory"]


async def test_with_checks_off_a_memory_records_nothing(rt: Runtime, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api", {"a.py": "a\n"})
    on = await manage.add_memory(rt, "The entry point is a.py", scope=f"ns:{repo}")
    assert on.cites is not None
    rt.settings = rt.settings.model_copy(update={"memory_cites": False})
    off = await manage.add_memory(rt, "The test entry is a.py", scope=f"ns:{repo}")
    assert off.cites is None


async def test_recalls_while_a_rename_is_wanted_plan_one_lookup_at_a_time(
    rt: Runtime, book: MemoryBook, tmp_path: Path
) -> None:
    """Every recall while a moved file's pair is wanted asks for the lookup; one is planned
    until it ends (a busy background held one job per recall, each asking git the same)."""
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\nhost = x\n" * 5})
    fact = cited(repo, "f1", "The service reads its port from conf/app.toml", age=1)
    await book.write(puts=[fact], new={fact.id})
    git(repo, "mv", "conf/app.toml", "conf/main.toml")
    git(repo, "commit", "-qm", "rename")
    spawned: list[str] = []
    spawn = rt.background.spawn

    def counted(coro: Any, *, name: str) -> bool:
        spawned.append(name)
        return spawn(coro, name=name)

    rt.background.spawn = counted  # type: ignore[method-assign]
    for _ in range(3):
        await recall(rt, "which port does the service read", scopes=[fact.scope])
    assert spawned == ["memory-cites-renames"]
    await rt.background.drain()
    found = await recall(rt, "which port does the service read", scopes=[fact.scope])
    assert "conf/main.toml" in found[0].label  # the lookup ran: the move is followed
    assert not rt.project_checks.lookup_planned
