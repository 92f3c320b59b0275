"""Recall checks the files its memories cite: what changed is said, what is gone ranks last."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

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
