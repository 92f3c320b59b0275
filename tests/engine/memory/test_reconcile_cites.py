"""Reconciliation puts the facts about a file a new fact names first, and an update closes
the stale one as any replaced fact is closed."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlane.engine.memory import manage
from memlane.engine.memory.apply import Provenance, neighbourhood
from memlane.engine.memory.reconcile import citing_first
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.types import Citations, CitedFile, Fact
from tests.support.gitrepo import git, make_repo
from tests.support.text import ScriptedLLM

WHEN = datetime(2026, 11, 2, tzinfo=UTC)


def fact(fact_id: str, text: str, cited: str | None = None) -> Fact:
    made = Fact(fact_id, "ns:x", "s", "memory", text, WHEN, WHEN)
    if cited is None:
        return made
    return replace(made, cites=Citations("/x", (CitedFile(cited, "git:0"),), WHEN))


def test_facts_about_a_named_file_come_first_in_their_order() -> None:
    existing = [
        fact("a", "The user prefers tabs"),
        fact("b", "The settings live in app.toml", cited="conf/app.toml"),
        fact("c", "Port 80 is closed"),
        fact("d", "conf/app.toml is read at start"),
    ]
    new = ["The port in conf/app.toml is 9090"]
    assert [f.id for f in citing_first(new, existing)] == ["b", "d", "a", "c"]
    assert [f.id for f in citing_first(["The user likes tea"], existing)] == ["a", "b", "c", "d"]
    bare = [f.id for f in citing_first(["app.toml sets the port"], existing)]
    assert bare == ["b", "d", "a", "c"]


async def test_an_update_about_the_file_replaces_the_stale_fact(
    rt: Runtime, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 8080\n"})
    scope = f"ns:{repo}"
    old = await manage.add_memory(rt, "The service settings live in app.toml", scope=scope)
    assert old.cites is not None
    assert [f.path for f in old.cites.files] == ["conf/app.toml"]
    for n in range(20):
        await manage.add_memory(
            rt, f"The port {n} is now 9090 in the conf of app {n} toml", scope=scope
        )
    (repo / "conf/app.toml").write_text("port = 9090\n")
    git(repo, "commit", "-qam", "port")
    new = "The port in conf/app.toml is now 9090"
    near = await neighbourhood(rt, [new], scope)
    assert near[0].id == old.id

    scripted_llm.push(json.dumps([{"event": "UPDATE", "id": "0", "text": new}]))
    done = await manage.reconcile_memory(rt, new, scope=scope, source=Provenance("mcp"))
    assert done.outcome == "updated"
    assert done.replaced == [old.id]
    closed = rt.store.get_fact(old.id)
    assert closed is not None
    assert closed.valid_to is not None
    [written] = done.facts
    assert written.cites is not None
    assert written.cites.head == git(repo, "rev-parse", "HEAD")
    assert written.cites.files[0].blob == "git:" + git(repo, "hash-object", "conf/app.toml")


async def test_the_neighbourhood_is_read_in_one_store_read_in_the_searchs_order(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a reconciliation compares with is read in one store read, not one a fact (a
    batch's forty neighbours were forty reads), and kept in the search's order."""
    scope = "ns:x"
    for n in range(6):
        await manage.add_memory(rt, f"The port {n} of the api server is open", scope=scope)
    new = "The port 3 of the api server is closed"
    hits = await search(rt, new, scopes=(scope,), roles=("memory",), top_k=5)
    reads: list[str] = []
    monkeypatch.setattr(rt.store, "get_fact", lambda fact_id: reads.append(fact_id))
    listed = rt.store.list_facts

    def counted(**query: Any) -> list[Fact]:
        reads.append("list_facts")
        return listed(**query)

    monkeypatch.setattr(rt.store, "list_facts", counted)
    near = await neighbourhood(rt, [new], scope)
    assert reads == ["list_facts"]
    assert [f.id for f in near] == [hit.ref for hit in hits]
    assert len(near) == 5
