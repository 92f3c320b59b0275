"""The memory tools on a real store: reconciliation on add, namespaces, soft deletes."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from memlane.engine.memory import manage
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore
from memlane.views.tools import Binding
from memlane.views.tools.memory_tools import MemorySearchArgs
from tests.support.text import ScriptedLLM
from tests.views.tools.conftest import call, chat

SHOP = Binding(namespace="shop", via="mcp")


async def test_add_goes_through_reconciliation_and_a_correction_replaces_the_fact(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    first = await call(rt, SHOP, "memory_add", text="The shop deploys on Fridays")
    assert not first.error, first.text
    old = rt.store.list_facts(scope="ns:shop")[0]
    scripted_llm.push(
        json.dumps([{"event": "UPDATE", "id": "0", "text": "The shop deploys on Mondays"}])
    )
    second = await call(rt, SHOP, "memory_add", text="Deploys moved to Mondays at the shop")
    assert not second.error, second.text
    assert old.id in second.text  # told what it replaced
    assert "EXISTING" in scripted_llm.calls[-1].messages[-1]["content"]
    now = datetime.now(UTC)
    live = [f for f in rt.store.list_facts(scope="ns:shop") if f.valid_at(now)]
    assert [f.text for f in live] == ["The shop deploys on Mondays"]
    assert live[0].conversation_id == "mcp"
    closed = rt.store.get_fact(old.id)
    assert closed is not None
    assert not closed.deleted  # kept as what was true before
    assert (closed.replaced_by, live[0].supersedes) == (live[0].id, old.id)
    assert closed.valid_to == live[0].valid_from


async def test_search_as_of_a_date_and_a_memory_s_history(rt: Runtime) -> None:
    old = await manage.add_memory(
        rt,
        "The shop's till runs Windows",
        scope="ns:shop",
        valid_from=datetime(2025, 5, 1, tzinfo=UTC),
    )
    _, new = await manage.supersede_memory(
        rt, old.id, "The shop's till runs Linux", at=datetime(2026, 2, 1, tzinfo=UTC)
    )
    now = await call(rt, SHOP, "memory_search", query="till runs")
    assert "runs Linux" in now.text
    assert "Windows" not in now.text
    assert "since 2026-02-01" in now.text
    then = await call(rt, SHOP, "memory_search", query="till runs", date="2025-12-24")
    assert not then.error, then.text
    assert "as of 2025-12-24" in then.text
    assert "Windows" in then.text
    assert "Linux" not in then.text
    change = await call(rt, SHOP, "memory_search", query="what did the till run before?")
    assert "2025-05-01 → 2026-02-01, replaced] The shop's till runs Windows" in change.text
    assert "since 2026-02-01] The shop's till runs Linux" in change.text
    history = await call(rt, SHOP, "memory_history", id=new.id[:8])
    assert not history.error, history.text
    rows = [row for row in history.text.splitlines() if row.startswith("- ")]
    assert [row.split("] ")[1] for row in rows] == [
        "The shop's till runs Windows",
        "The shop's till runs Linux",
    ]
    assert "[2025-05-01 → 2026-02-01, replaced]" in rows[0]
    assert "[since 2026-02-01, current]" in rows[1]
    opened = await call(rt, SHOP, "memory_get", ids=[old.id])
    assert "true: 2025-05-01 → 2026-02-01" in opened.text
    assert f"replaced by: {new.id}" in opened.text
    today = await call(rt, SHOP, "memory_search", query="till runs", as_of="now")
    assert not today.error, today.text  # read as every face reads a moment
    assert "runs Linux" in today.text
    assert "Windows" not in today.text
    bad = await call(rt, SHOP, "memory_search", query="till", as_of="soon")
    assert bad.error
    assert "as_of" in bad.text


async def test_history_never_shows_a_version_of_another_namespace(rt: Runtime) -> None:
    mine = await manage.add_memory(rt, "The shop opens at nine", scope="ns:shop")
    theirs = await manage.add_memory(rt, "Project Falcon opens in May", scope="ns:other")
    linked = replace(mine, supersedes=theirs.id)  # a link a hand edit could make
    rt.store.put_fact(linked)
    history = await call(rt, SHOP, "memory_history", id=mine.id)
    assert "Falcon" not in history.text
    assert "1 version(s)" in history.text


async def test_an_exact_repeat_is_kept_once_without_asking_a_model(
    rt: Runtime, scripted_llm: ScriptedLLM
) -> None:
    await call(rt, SHOP, "memory_add", text="The shop's printer is on the second floor")
    again = await call(rt, SHOP, "memory_add", text="The shop's printer is on the second floor")
    assert "Already remembered" in again.text
    assert len(rt.store.list_facts(scope="ns:shop")) == 1
    assert scripted_llm.calls == []


async def test_search_then_get_discloses_progressively(rt: Runtime) -> None:
    long_text = "The release checklist: " + "run the migrations, " * 30 + "then tag it."
    await manage.add_memory(rt, long_text, scope="ns:shop")
    found = await call(rt, SHOP, "memory_search", query="release checklist")
    line = next(row for row in found.text.splitlines() if row.startswith("- "))
    assert len(line) < 220  # one line, cut
    assert "then tag it." not in found.text
    short = line.split()[1]
    opened = await call(rt, SHOP, "memory_get", ids=[short])
    assert "then tag it." in opened.text
    assert "scope: ns:shop" in opened.text


async def test_another_namespace_is_absent_unless_named_on_an_all_namespaces_server(
    rt: Runtime,
) -> None:
    secret = await manage.add_memory(rt, "Project Falcon ships in March", scope="ns:other")
    plain = await call(rt, SHOP, "memory_search", query="Falcon ships")
    assert "Falcon ships in March" not in plain.text
    for name, arguments in (
        ("memory_get", {"ids": [secret.id]}),
        ("memory_update", {"id": secret.id, "text": "Falcon is cancelled"}),
        ("memory_delete", {"id": secret.id}),
    ):
        result = await call(rt, SHOP, name, **arguments)
        assert "Falcon ships" not in result.text
        assert "no memory with id" in result.text
    assert rt.store.get_fact(secret.id) == secret
    operator = Binding(namespace="shop", all_namespaces=True)
    unnamed = await call(rt, operator, "memory_search", query="Falcon ships")
    assert "Falcon ships in March" not in unnamed.text
    named = await call(rt, operator, "memory_search", query="Falcon ships", scope="ns:other")
    assert "Falcon ships in March" in named.text


async def test_a_conversation_scope_follows_its_sessions_namespace(
    rt: Runtime, sqlite_store: SQLiteStore
) -> None:
    theirs = chat(sqlite_store, "their-session", ["hi"], namespace="other")
    ours = chat(sqlite_store, "our-session", ["hi"], namespace="shop")
    await manage.add_memory(rt, "A note in their conversation", scope=f"conv:{theirs.id}")
    await manage.add_memory(rt, "A note in our conversation", scope=f"conv:{ours.id}")
    refused = await call(rt, SHOP, "memory_search", query="note", scope=f"conv:{theirs.id}")
    assert refused.error
    allowed = await call(rt, SHOP, "memory_search", query="note", scope=f"conv:{ours.id}")
    assert "A note in our conversation" in allowed.text


async def test_update_and_delete_act_through_the_files_and_index(rt: Runtime) -> None:
    fact = await manage.add_memory(rt, "The staging host is stg-1", scope="ns:shop")
    updated = await call(
        rt, SHOP, "memory_update", memory_id=fact.id, text="The staging host is stg-2"
    )
    assert not updated.error, updated.text
    assert "stg-2" in (await call(rt, SHOP, "memory_search", query="staging host")).text
    deleted = await call(rt, SHOP, "memory_delete", id=fact.id[:8])
    assert not deleted.error, deleted.text
    gone = rt.store.get_fact(fact.id)
    assert gone is not None
    assert gone.deleted
    assert "stg-2" not in (await call(rt, SHOP, "memory_search", query="staging host")).text
    files = list((rt.settings.memory_path / "entries").rglob("*.md"))
    assert any("deleted" in path.parts for path in files)


async def test_an_unknown_scope_is_refused_with_the_scopes_the_search_tool_describes(
    rt: Runtime,
) -> None:
    refused = await call(rt, SHOP, "memory_search", query="deploys", scope="everywhere-ish")
    assert refused.error
    described = MemorySearchArgs.model_json_schema()["properties"]["scope"]["description"]
    forms = "'namespace', 'global', 'session', 'ns:<name>' or 'conv:<session id>'"
    assert forms in refused.text
    assert forms in described
