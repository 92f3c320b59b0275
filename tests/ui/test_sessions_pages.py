"""The inspector's session pages against a running proxy that served real turns."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx
import openai

from memlane.engine.memory import manage
from tests.proxy.conftest import QUIET
from tests.proxy.test_governance import MODEL, SMALL, history, summaries
from tests.support.upstream import ProxyFactory, Reply, RunningProxy, ScriptedUpstream, ToolCallSpec
from tests.ui.conftest import bearer_client, browser_client, form


def chat(proxy: RunningProxy, session: str, text: str, **headers: str) -> None:
    with openai.OpenAI(
        base_url=proxy.url,
        api_key="sk-client",
        max_retries=0,
        default_headers={"X-Memlane-Session": session, **headers},
    ) as client:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def post(proxy: RunningProxy, session: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{proxy.url}/chat/completions",
        json=body,
        headers={"x-memlane-session": session, "user-agent": "codex_cli_rs/0.169.0 (Linux)"},
        timeout=60,
    )


def rows(page: str) -> list[str]:
    """The session titles of a list page, in order."""
    return [
        html.unescape(t) for t in re.findall(r'<a href="/ui/sessions/[0-9a-f]+">([^<]+)</a>', page)
    ]


def test_the_list_shows_title_namespace_client_counts_and_searches(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    chat(proxy, "alpha", "Plan the walrus migration", **{"X-Memlane-Repo": "zoo"})
    chat(proxy, "beta", "Write the <b>release</b> notes")
    with bearer_client(proxy) as client:
        page = client.get("/ui/sessions").text
        found = client.get("/ui/sessions", params={"q": "walrus"}).text
        by_namespace = client.get("/ui/sessions", params={"namespace": "zoo"}).text
        partial = client.get(
            "/ui/sessions",
            params={"q": "release"},
            headers={"hx-request": "true", "hx-target": "session-rows"},
        ).text
    assert rows(page) == ["Write the <b>release</b> notes", "Plan the walrus migration"]
    assert "&lt;b&gt;release&lt;/b&gt;" in page  # stored text is escaped, never markup
    assert '<td title="zoo">zoo</td>' in page
    assert "OpenAI/Python" in page  # the client, from its User-Agent
    assert rows(found) == ["Plan the walrus migration"]
    assert rows(by_namespace) == ["Plan the walrus migration"]
    assert partial.startswith('<div id="session-rows">')  # only the rows, for htmx
    assert "<html" not in partial
    assert rows(partial) == ["Write the <b>release</b> notes"]


def test_the_list_pages(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    for i in range(55):
        session = proxy.store.ensure_session(f"key-{i:02d}")
        proxy.store.update_session(session.id, title=f"session {i:02d}")
    with bearer_client(proxy) as client:
        first = client.get("/ui/sessions").text
        second = client.get("/ui/sessions", params={"page": 2}).text
    assert len(rows(first)) == 50
    assert "page 1 of 2" in first
    assert len(rows(second)) == 5
    assert set(rows(first)).isdisjoint(rows(second))


def test_a_timeline_shows_tool_pairs_a_compaction_and_masked_outputs(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    messages = history(40)
    messages.append({"role": "user", "content": "Where is the config file?"})
    assert post(proxy, "gov", {"model": MODEL, "messages": messages}).status_code == 200
    session = proxy.store.find_session("gov")
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}").text
        link = re.search(rf'href="(/ui/sessions/{session.id}/outputs/\d+)"', page)
        assert link is not None
        output = client.get(link.group(1))
    # a tool call with its result inside it
    call = page.index("run({&#34;step&#34;: 39})")
    assert page.index('class="tool-result"', call) > call
    assert page.count('class="item msg role-tool') == 0  # every result sits under its call
    # the compaction: tokens before -> after, what it masked and dropped, the snapshot
    text = html.unescape(page)
    assert "compaction" in page
    assert "goal: build it; config conf/app.toml" in text
    line = re.search(r"([\d,]+) -> ([\d,]+) tokens; (.*)", text)
    assert line is not None
    before, after = (int(n.replace(",", "")) for n in line.group(1, 2))
    assert before > after
    assert re.search(r"\d+ tool outputs? masked \(-[\d,]+ tokens\)", line.group(3))
    assert "0 items" not in line.group(3)
    assert "tokens tokens" not in text
    assert "what was dropped" in page
    # a long tool result is a preview with a control that shows it all
    assert page.count('<details class="tool-output">') >= 1
    assert re.search(r"show all \([\d,]+ characters\)", page)
    # the turn record: the client and governance's tokens
    assert "codex_cli_rs/0.169.0" in page
    assert re.search(r"governed [\d,.k]+ → [\d,.k]+ of 3,840", page)
    # the masked output, whole
    assert output.status_code == 200
    assert output.text in [m.get("content") for m in messages]
    assert len(output.text.split()) == 250


def test_editing_the_todo_reaches_the_next_request(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**{**QUIET, "scaffold_clients": "all"})
    chat(proxy, "todo-demo", "Start the refactor")
    session = proxy.store.find_session("todo-demo")
    page = f"/ui/sessions/{session.id}"
    with browser_client(proxy) as client:
        done = form(
            client, f"{page}/texts", page, todo="- [ ] rename the parser", pinned="Use tabs."
        )
        assert done.status_code == 303
        shown = client.get(page).text
    assert "- [ ] rename the parser</textarea>" in shown
    chat(proxy, "todo-demo", "Continue")
    sent = json.dumps(upstream.model_requests[-1].json)
    assert "rename the parser" in sent
    assert "Use tabs." in sent


def test_rename_fork_export_and_delete(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    chat(proxy, "life", "First prompt of the session")
    session = proxy.store.find_session("life")
    page = f"/ui/sessions/{session.id}"
    with browser_client(proxy) as client:
        assert form(client, f"{page}/title", page, title="Renamed here").status_code == 303
        assert proxy.store.get_session(session.id).title == "Renamed here"
        forked = form(client, f"{page}/fork", page)
        assert forked.status_code == 303
        fork_id = forked.headers["location"].rsplit("/", 1)[1]
        fork = proxy.store.get_session(fork_id)
        assert fork.parent_id == session.id
        assert proxy.store.list_messages(fork_id)[0].message.text == "First prompt of the session"
        export = client.get(f"{page}/export")
        assert export.status_code == 200
        assert "attachment" in export.headers["content-disposition"]
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert lines[0]["type"] == "session"
        assert lines[0]["id"] == session.id
        assert any(line.get("type") == "message" for line in lines)
        confirm = client.get(f"{page}/delete")
        assert "Delete the session" in confirm.text
        assert proxy.store.get_session(session.id) is not None  # asking deletes nothing
        gone = form(client, f"{page}/delete", f"{page}/delete")
        assert gone.status_code == 303
        assert proxy.store.get_session(session.id) is None
        assert client.get(page).status_code == 404
        assert proxy.store.get_session(fork_id) is not None


def test_edits_and_deletes_need_an_exact_reference(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    chat(proxy, "zulu", "hi")
    chat(proxy, "important-work", "Plan the zulu launch")
    work = proxy.store.find_session("important-work")
    page = f"/ui/sessions/{work.id}"
    with browser_client(proxy) as client:
        assert form(client, "/ui/sessions/zulu/delete", page).status_code == 303
        assert proxy.store.find_session("zulu") is None
        assert client.get("/ui/sessions/zulu").status_code == 200  # reading may guess
        assert client.get("/ui/sessions/zulu/delete").status_code == 404
        assert form(client, "/ui/sessions/zulu/delete", page).status_code == 404
        assert form(client, "/ui/sessions/zulu/title", page, title="x").status_code == 404
        assert form(client, "/ui/sessions/zulu/texts", page, todo="x").status_code == 404
    kept = proxy.store.get_session(work.id)
    assert kept is not None
    assert kept.title != "x"


def test_live_updates_bring_only_what_is_new(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    chat(proxy, "live", "the first question")
    session = proxy.store.find_session("live")
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}").text
        poll = re.search(r'hx-get="(/ui/sessions/[^"]+/live\?[^"]+)"', page)
        assert poll is not None
        url = html.unescape(poll.group(1))
        assert client.get(url).text.count('class="item') == 0  # nothing new yet
        chat(proxy, "live", "the second question")
        update = client.get(url).text
    assert "the second question" in update
    assert "the first question" not in update
    assert 'class="item turn' in update
    assert 'id="live"' in update  # the next poller
    assert 'id="session-stats" class="stats" hx-swap-oob="true"' in update


def test_a_turn_shows_the_memories_recall_injected_with_their_scores(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(
        memory_enabled=True,
        memory_extract_facts=False,
        memory_store_turns=False,
        memory_summarization=False,
        index_enabled=False,
    )
    proxy.call(lambda: manage.add_memory(proxy.runtime, "The staging database is called heron."))
    chat(proxy, "recall", "What is the staging database called?")
    session = proxy.store.find_session("recall")
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}").text
    assert "recalled memories" in page
    assert "The staging database is called heron." in page
    row = page[page.index("The staging database is called heron.") :]
    assert re.search(r'<td class="num">\d\.\d{3}</td>', row)  # keyword score
    assert re.search(r'<td class="num">—</td>', row)  # no dense score: dense retrieval is off


def test_unknown_sessions_and_outputs_are_404_pages(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(**QUIET)
    session = proxy.store.ensure_session("empty")
    with bearer_client(proxy) as client:
        missing = client.get("/ui/sessions/nope")
        output = client.get(f"/ui/sessions/{session.id}/outputs/12345")
    assert missing.status_code == 404
    assert "no session" in missing.text
    assert output.status_code == 404


def test_tool_calls_from_the_upstream_are_paired_with_the_next_requests_results(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    upstream.script(Reply(tool_calls=[ToolCallSpec("read_file", '{"path": "a.txt"}')]))
    first = [{"role": "user", "content": "read a.txt"}]
    answer = post(proxy, "tools", {"model": "m", "messages": first}).json()
    call = answer["choices"][0]["message"]
    follow = [
        *first,
        {"role": "assistant", "content": None, "tool_calls": call["tool_calls"]},
        {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "contents of a"},
    ]
    assert post(proxy, "tools", {"model": "m", "messages": follow}).status_code == 200
    session = proxy.store.find_session("tools")
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}").text
    call_at = page.index("read_file(")
    result_at = page.index("contents of a")
    assert call_at < result_at
    assert page.rfind('<li id="m', 0, result_at) == page.rfind('<li id="m', 0, call_at)


def test_a_long_session_shows_its_last_messages_and_links_the_earlier_ones(
    proxy_factory: ProxyFactory,
) -> None:
    from memlane.store import NewMessage
    from memlane.types import Message

    proxy = proxy_factory(**QUIET)
    session = proxy.store.ensure_session("long")
    long_text = "x" * 7_000
    texts = [f"message number {i}" for i in range(149)] + [long_text]
    proxy.store.append_messages(
        session.id, [NewMessage(Message(role="user", text=t), 1) for t in texts]
    )
    with bearer_client(proxy) as client:
        last = client.get(f"/ui/sessions/{session.id}").text
        earlier = re.search(r'href="(/ui/sessions/[0-9a-f]+\?start=\d+)">← earlier', last)
        assert earlier is not None
        first = client.get(html.unescape(earlier.group(1))).text
    assert "message number 50<" in last
    assert "message number 49<" not in last
    assert "1,000 more characters: export the session" in last  # a long text is clipped
    assert "message number 0<" in first
    assert "message number 99<" in first
    assert "message number 100<" not in first
    assert "later messages →" in first
    assert 'id="live"' not in first  # an earlier window does not poll


def test_a_recalled_session_summary_links_to_its_session(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory(
        memory_enabled=True,
        memory_extract_facts=False,
        memory_store_turns=False,
        memory_summarization=False,
        index_enabled=False,
    )
    design = proxy.store.ensure_session("design", namespace="shop")
    summary = "The staging database is called heron; backups run nightly."
    proxy.store.update_session(design.id, metadata={"name": "staging", "summary": summary})
    chat(proxy, "recall", "What is the staging database called?", **{"X-Memlane-Repo": "shop"})
    session = proxy.store.find_session("recall")
    (turn,) = [e for e in proxy.store.list_events(session.id) if e.kind == "turn"]
    assert [(h["ref"], h.get("kind")) for h in turn.payload["recalled"]] == [(design.id, "session")]
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}").text
    assert f'<a href="/ui/sessions/{design.id}">summary of session {design.id[:8]}</a>' in page
    assert "(gone)" not in page


def test_sessions_are_filtered_and_shown_by_project(proxy_factory: ProxyFactory) -> None:
    """A project found by its folder shows its name; the filter keeps two `api`s apart."""
    proxy = proxy_factory(**QUIET)
    chat(proxy, "work", "Plan the work api", **{"X-Memlane-Repo": "/home/ann/work/api"})
    chat(proxy, "play", "Plan the play api", **{"X-Memlane-Repo": "/home/ann/play/api"})
    with bearer_client(proxy) as client:
        page = client.get("/ui/sessions").text
        work = client.get("/ui/sessions", params={"namespace": "/home/ann/work/api"}).text
    assert '<td title="/home/ann/work/api">api</td>' in page
    assert "api — /home/ann/work/api (1)" in page
    assert "api — /home/ann/play/api (1)" in page
    assert rows(work) == ["Plan the work api"]


def test_the_inspector_reads_a_tool_output_from_the_sessions_folder_only(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    session = proxy.store.ensure_session("planted-output")
    planted = proxy.store.add_event(
        session.id, "governance.tool_output", {"index": 0, "path": "/etc/passwd"}
    )
    with bearer_client(proxy) as client:
        page = client.get(f"/ui/sessions/{session.id}/outputs/{planted.id}")
    assert page.status_code == 404
    assert "root:" not in page.text
