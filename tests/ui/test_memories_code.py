"""The inspector marks a memory whose cited project files moved on, and confirms it."""

from __future__ import annotations

from pathlib import Path

from tests.support.gitrepo import git, make_repo
from tests.support.upstream import RunningProxy
from tests.ui.conftest import bearer_client, browser_client, form
from tests.ui.test_memories_pages import add, proxy

__all__ = ["proxy"]  # the fixture


def test_a_stale_memory_has_a_badge_and_can_be_confirmed(
    proxy: RunningProxy, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", {"conf/app.toml": "port = 1\n"})
    fact = add(proxy, "The port is set in conf/app.toml", scope=f"ns:{repo}")
    calm = add(proxy, "The user prefers tabs", scope=f"ns:{repo}")
    listing = f"/ui/memories?scope=ns:{repo}"
    with bearer_client(proxy) as client:
        assert "stale:" not in client.get(listing).text
        (repo / "conf/app.toml").write_text("port = 2\n")
        git(repo, "commit", "-qam", "port")
        page = client.get(listing).text
        assert page.count('<span class="badge warn stale"') == 1
        assert "conf/app.toml has changed since" in page
        shown = client.get(f"/ui/memories/{fact.id}").text
        assert "stale: changed" in shown
        assert "<code>conf/app.toml</code>" in shown
        assert "stale:" not in client.get(f"/ui/memories/{calm.id}").text
    page_url = f"/ui/memories/{fact.id}"
    with browser_client(proxy) as browser:
        done = form(browser, f"{page_url}/confirm", page_url)
        assert done.status_code == 303
        assert "stale:" not in browser.get(page_url).text
    confirmed = proxy.store.get_fact(fact.id)
    assert confirmed.cites.head == git(repo, "rev-parse", "HEAD")
