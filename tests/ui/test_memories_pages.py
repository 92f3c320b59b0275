"""The inspector's memory pages: browse, search with scores, provenance, history, edit, forget.

Edits go through the CLI's code path, so each test checks the three places a
memory lives: its Markdown file, its git history and the search index.
"""

from __future__ import annotations

import html
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.engine.memory import manage
from memlane.engine.memory.entries import new_fact
from memlane.engine.memory.recall import recall
from memlane.files.memory_files import new_id
from memlane.store import SearchFilter
from memlane.types import Fact
from tests.support.upstream import ProxyFactory, RunningProxy
from tests.ui.conftest import bearer_client, browser_client, form

MEMORY = {
    "memory_enabled": True,
    "memory_extract_facts": False,
    "memory_store_turns": False,
    "memory_summarization": False,
    "index_enabled": False,
}


@pytest.fixture
def proxy(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory(**MEMORY)


def add(proxy: RunningProxy, text: str, scope: str = "global") -> Fact:
    fact: Fact = proxy.call(lambda: manage.add_memory(proxy.runtime, text, scope=scope))
    return fact


def git_log(proxy: RunningProxy) -> str:
    root = proxy.settings.memory_path
    done = subprocess.run(
        ["git", "log", "-p", "--format=%s"], cwd=root, capture_output=True, text=True, check=True
    )
    return done.stdout


def keyword_ids(proxy: RunningProxy, text: str) -> list[str]:
    return [h.ref for h in proxy.store.keyword_search(text, SearchFilter(kinds=("fact",)))]


def test_browse_by_scope_newest_first(proxy: RunningProxy) -> None:
    add(proxy, "Global preference: tabs over spaces")
    add(proxy, "The zoo repo deploys on Fridays", scope="ns:zoo")
    add(proxy, "The zoo repo uses Postgres 16", scope="ns:zoo")
    with bearer_client(proxy) as client:
        everything = client.get("/ui/memories").text
        zoo = client.get("/ui/memories", params={"scope": "ns:zoo"}).text
        bad = client.get("/ui/memories", params={"scope": "nowhere"})
    assert "3 entries" in everything
    assert re.search(r'scope=ns%3Azoo"[^>]*>ns:zoo</a> <span class="muted">2</span>', everything)
    assert "2 entries in ns:zoo" in zoo
    assert zoo.index("Postgres 16") < zoo.index("deploys on Fridays")  # newest first
    assert "tabs over spaces" not in zoo
    assert bad.status_code == 400
    assert "invalid scope" in bad.text


def test_search_runs_the_read_path_and_shows_each_score(proxy: RunningProxy) -> None:
    add(proxy, "The staging database is called heron", scope="ns:zoo")
    add(proxy, "Production runs in eu-west", scope="ns:zoo")
    add(proxy, "The heron bird nests by rivers", scope="ns:birds")
    with bearer_client(proxy) as client:
        everywhere = client.get("/ui/memories", params={"q": "heron database"}).text
        zoo_only = client.get("/ui/memories", params={"q": "heron", "scope": "ns:zoo"}).text
    found = proxy.call(lambda: recall(proxy.runtime, "heron database", scopes=None))
    shown = re.findall(r'<a href="/ui/memories/([0-9a-f]+)">', everywhere)
    assert shown == [r.candidate.ref for r in found]  # the proxy's ranking, in its order
    first_row = everywhere[everywhere.index("staging database is called heron") :]
    scores = re.findall(r'<td class="num">([^<]+)</td>', first_row)[:4]
    keyword, dense, relevance, final = scores
    assert float(keyword) > 0
    assert dense == "—"  # dense retrieval is off by default
    assert float(relevance) > 0
    assert float(final) > 0
    assert "bird nests" not in zoo_only


def test_a_memory_shows_its_provenance_file_and_history(proxy: RunningProxy) -> None:
    session = proxy.store.ensure_session("origin-session")
    proxy.store.update_session(session.id, title="Where it was said")
    fact = new_fact(
        scope="ns:zoo",
        conversation_id=session.id,
        role="memory",
        text="The user's cat is named Miso",
        fact_id=new_id(),
        source_session=session.id,
        source_message=42,
    )

    async def write() -> None:
        book = proxy.runtime.memory_book
        await book.write(puts=[fact])
        await book.commit("memory: added from a conversation\n\n+ The user's cat is named Miso")

    proxy.call(write)
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/memories/{fact.id}").text
    assert "The user&#39;s cat is named Miso" in page
    assert f'href="/ui/sessions/{session.id}#m42"' in page
    assert "Where it was said" in page
    path = re.search(r"<dt>file</dt><dd><code>([^<]+)</code>", page)
    assert path is not None
    assert Path(html.unescape(path.group(1))).read_text().endswith("The user's cat is named Miso\n")
    assert "memory: added from a conversation" in page
    assert '<span class="add">+The user&#39;s cat is named Miso</span>' in page


def test_an_edit_changes_the_file_the_history_and_the_index_together(
    proxy: RunningProxy,
) -> None:
    fact = add(proxy, "The deploy window is Tuesday")
    path = manage.memory_file(proxy.runtime, fact)
    assert path is not None
    page = f"/ui/memories/{fact.id}"
    with browser_client(proxy) as client:
        done = form(client, f"{page}/edit", page, text="The deploy window is Thursday")
        assert done.status_code == 303
        shown = client.get(page).text
    assert (
        manage.memory_file(proxy.runtime, fact)
        .read_text()
        .endswith("The deploy window is Thursday\n")
    )
    log = git_log(proxy)
    assert f"memory: edited {fact.id}" in log
    assert "+The deploy window is Thursday" in log
    assert "-The deploy window is Tuesday" in log
    assert keyword_ids(proxy, "Thursday") == [fact.id]
    assert keyword_ids(proxy, "Tuesday") == []
    assert f"memory: edited {fact.id}" in shown  # the page's history shows the new commit
    assert '<span class="del">-The deploy window is Tuesday</span>' in shown


def test_a_bad_edit_changes_nothing(proxy: RunningProxy) -> None:
    fact = add(proxy, "Keep this text")
    before = git_log(proxy)
    page = f"/ui/memories/{fact.id}"
    with browser_client(proxy) as client:
        empty = form(client, f"{page}/edit", page, text="   ")
        missing = form(client, "/ui/memories/0123456789abcdef/edit", page, text="x")
    assert empty.status_code == 400
    assert "needs some text" in empty.text
    assert missing.status_code == 404
    assert manage.memory_file(proxy.runtime, fact).read_text().endswith("Keep this text\n")
    assert git_log(proxy) == before


def test_forgetting_takes_the_memory_out_of_recall_and_keeps_its_tombstone(
    proxy: RunningProxy,
) -> None:
    fact = add(proxy, "The office wifi password rotates monthly")
    found = proxy.call(lambda: recall(proxy.runtime, "office wifi", scopes=["global"]))
    assert [r.candidate.ref for r in found] == [fact.id]
    page = f"/ui/memories/{fact.id}"
    with browser_client(proxy) as client:
        confirm = client.get(f"{page}/forget")
        assert "Forget this memory?" in confirm.text
        assert not proxy.store.get_fact(fact.id).deleted  # asking forgets nothing
        done = form(client, f"{page}/forget", f"{page}/forget")
        assert done.status_code == 303
        shown = client.get(page).text
        listed = client.get("/ui/memories").text
        with_forgotten = client.get("/ui/memories", params={"deleted": "true"}).text
    assert proxy.call(lambda: recall(proxy.runtime, "office wifi", scopes=["global"])) == []
    path = manage.memory_file(proxy.runtime, proxy.store.get_fact(fact.id))
    assert path is not None
    assert "/deleted/" in str(path)
    assert f"memory: forgot {fact.id}" in git_log(proxy)
    assert "forgotten" in shown
    assert "office wifi" not in listed
    assert "office wifi" in with_forgotten


def test_a_replaced_memory_shows_its_versions_and_when_each_was_true(proxy: RunningProxy) -> None:
    fact: Fact = proxy.call(
        lambda: manage.add_memory(
            proxy.runtime, "The team is Payments", valid_from=datetime(2026, 1, 5, tzinfo=UTC)
        )
    )
    closed, new = proxy.call(
        lambda: manage.supersede_memory(
            proxy.runtime, fact.id, "The team is Search", at=datetime(2026, 3, 2, tzinfo=UTC)
        )
    )
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/memories/{new.id}").text
        old_page = client.get(f"/ui/memories/{closed.id}").text
    assert "<dt>true</dt><dd>since 2026-03-02</dd>" in page
    assert f'<dt>replaces</dt><dd><a href="/ui/memories/{closed.id}">' in page
    versions = page[page.index('aria-label="Versions"') :]
    assert versions.index("2026-01-05 → 2026-03-02") < versions.index("since 2026-03-02")
    assert "The team is Payments" in versions
    assert "<dt>true</dt><dd>2026-01-05 → 2026-03-02</dd>" in old_page
    assert f'<dt>replaced by</dt><dd><a href="/ui/memories/{new.id}">' in old_page
