"""A person's path through the inspector, in real headless Chromium.

Log in with the link `memlane serve` prints, open the session list, open a
session, see a tool call with its result and a compaction, edit the todo and
see it injected into the next proxied request, watch a new turn appear without
reloading, search memories, forget one and see it gone from recall. Every
request the page makes stays on memlane's own origin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from memlane.engine.memory import manage
from memlane.engine.memory.recall import recall
from tests.proxy.test_governance import MODEL, SMALL, history, summaries
from tests.support.browser import CHROMIUM_ARGS, MISSING, chromium_path
from tests.support.upstream import ProxyFactory, RunningProxy, ScriptedUpstream
from tests.ui.conftest import token_of


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        pytest.fail(MISSING)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def turn(proxy: RunningProxy, messages: list[dict[str, object]]) -> None:
    response = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": MODEL, "messages": messages},
        headers={"x-memlane-session": "agent-run", "user-agent": "codex_cli_rs/0.169.0"},
        timeout=60,
    )
    assert response.status_code == 200, response.text


def test_a_person_inspects_and_steers_memory_in_a_real_browser(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, browser: Browser
) -> None:
    proxy = proxy_factory(
        **{**SMALL, "memory_enabled": True, "memory_extract_facts": False},
        memory_store_turns=False,
        memory_summarization=False,
    )
    upstream.respond_with(summaries)
    messages = history(40)
    messages.append({"role": "user", "content": "Where is the config file?"})
    turn(proxy, messages)
    heron = proxy.call(lambda: manage.add_memory(proxy.runtime, "The staging database is heron"))
    proxy.call(lambda: manage.add_memory(proxy.runtime, "The release train leaves on Fridays"))

    context = browser.new_context()
    page: Page = context.new_page()
    origins: list[str] = []
    page.on("request", lambda request: origins.append(request.url))

    # log in with the one-time link; the token leaves the address bar
    page.goto(f"{proxy.base}/ui?token={token_of(proxy)}")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    assert "token=" not in page.url

    # the session list, then the session
    page.get_by_role("link", name="Sessions", exact=True).click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    page.get_by_role("link", name="Build it. The config file is conf/app.toml.").click()
    expect(page.locator(".tool-result").first).to_be_visible()
    expect(page.locator(".item.compaction").first).to_be_visible()
    expect(page.locator(".item.compaction").first).to_contain_text(
        re.compile(r"\d+ items? (#\d+-#\d+ )?dropped")
    )

    # edit the todo; the next proxied request carries it
    page.locator("#todo").fill("- [ ] check the config loader")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#todo")).to_have_value("- [ ] check the config loader")
    messages += [
        {"role": "assistant", "content": "It is conf/app.toml."},
        {"role": "user", "content": "Now fix the loader."},
    ]
    turn(proxy, messages)
    forwarded = [r for r in upstream.model_requests if summaries(r) is None][-1]
    assert "check the config loader" in json.dumps(forwarded.json)

    # the new turn appears on the open page without a reload
    expect(page.locator("#timeline")).to_contain_text("Now fix the loader.", timeout=15_000)

    # search memories, open one, forget it
    page.get_by_role("link", name="Memories", exact=True).click()
    page.get_by_label("Search memories").fill("staging database")
    page.get_by_role("button", name="Search").click()
    hit = page.get_by_role("link", name="The staging database is heron")
    expect(hit).to_be_visible()
    expect(page.locator("table.hits")).to_contain_text("keyword")
    hit.click()
    page.get_by_role("link", name="Forget…").click()
    page.get_by_role("button", name="Forget it").click()
    expect(page.locator("h1")).to_contain_text("forgotten")
    found = proxy.call(lambda: recall(proxy.runtime, "staging database heron", scopes=None))
    assert heron.id not in [r.candidate.ref for r in found]

    context.close()
    assert origins
    assert all(url.startswith(proxy.base) for url in origins), origins
