"""The inspector's session search and forms against a running proxy, over plain HTTP: what a
search matches, what a request it cannot read gets back, and a todo past its limit."""

from __future__ import annotations

import html
import re

from memlane.engine import scaffold
from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory
from tests.ui.conftest import bearer_client, browser_client, form


def rows(page: str) -> list[str]:
    """The session titles of a list page, in order."""
    return [
        html.unescape(t) for t in re.findall(r'<a href="/ui/sessions/[0-9a-f]+">([^<]+)</a>', page)
    ]


def test_the_search_matches_what_a_person_reads_not_the_metadata_json(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    store = proxy.store
    orders = store.ensure_session("orders-chat")
    store.update_session(
        orders.id,
        title="Which database for orders?",
        metadata={
            "name": "orders-database",
            "description": "Picking the orders database",
            "summary": "We chose PostgreSQL.",
            "tags": ["storage"],
            "indexed_at": "2026-03-01T10:00:00+00:00",
        },
    )
    notes = store.ensure_session("notes-chat")
    store.update_session(notes.id, title="Release notes", metadata={"name": "release-notes"})
    with bearer_client(proxy) as client:
        everything = rows(client.get("/ui/sessions").text)
        found = {
            q: rows(client.get("/ui/sessions", params={"q": q}).text)
            for q in ("name", "{", '"', "tags", "indexed_at", "postgresql", "STORAGE", "release")
        }
    assert sorted(everything) == ["Release notes", "Which database for orders?"]
    for query in ("name", "{", '"', "tags", "indexed_at"):  # JSON keys and punctuation
        assert found[query] == [], query
    assert found["postgresql"] == ["Which database for orders?"]  # the summary
    assert found["STORAGE"] == ["Which database for orders?"]  # a tag
    assert found["release"] == ["Release notes"]


def test_a_request_the_inspector_cannot_read_is_an_html_page_saying_why(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    session = proxy.store.ensure_session("bad-forms")
    with bearer_client(proxy) as client:
        listing = client.get("/ui/sessions", params={"page": "two"})
        timeline = client.get(f"/ui/sessions/{session.id}", params={"start": "-5"})
        api = client.get("/v1/memlane/sessions", params={"limit": "0"})
    for answer in (listing, timeline):
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        assert '<link rel="stylesheet"' in answer.text  # the inspector's own page
    assert "page &#39;two&#39;: Input should be a valid integer" in listing.text
    assert "start &#39;-5&#39;: Input should be greater than or equal to 0" in timeline.text
    # the admin API (JSON) answers as it did
    assert api.status_code == 422
    assert api.json()["error"]["param"] == "query.limit"


def test_a_todo_past_its_limit_is_cut_and_the_page_says_so(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET, todo_max_chars=60)
    session = proxy.store.ensure_session("long-todo")
    page = f"/ui/sessions/{session.id}"
    long_todo = "- [ ] " + "rename the parser " * 10
    with browser_client(proxy) as client:
        saved = form(client, f"{page}/texts", page, todo=long_todo, pinned="Use tabs.")
        assert saved.status_code == 303
        assert saved.headers["location"] == f"{page}?cut=todo#texts"
        shown = client.get(saved.headers["location"]).text
        kept_then = scaffold.read_texts(proxy.runtime, session)["todo"]
        short = form(client, f"{page}/texts", page, todo="- [ ] ship it")
        again = client.get(short.headers["location"]).text
    assert short.headers["location"] == f"{page}#texts"
    kept = scaffold.read_texts(proxy.runtime, session)
    assert len(kept["pinned"]) == len("Use tabs.")
    assert "The todo was longer than 60 characters, the most memlane keeps (todo_max_chars)" in (
        html.unescape(shown)
    )
    assert len(kept_then) == 60  # the setting every face cuts it to
    assert "[… truncated by memlane]</textarea>" in shown
    assert "was longer than" not in again
