"""The overview (counters per day) and the activity feed, after real proxied turns."""

from __future__ import annotations

import re

import httpx

from memlane.engine import turnlog
from memlane.engine.memory import manage
from tests.proxy.conftest import QUIET
from tests.support.upstream import Fail, ProxyFactory, Reply, ScriptedUpstream
from tests.ui.conftest import bearer_client


def ask(base: str, session: str, text: str) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    headers = {"x-memlane-session": session}
    return httpx.post(
        f"{base}/chat/completions", json=body, headers=headers, timeout=30
    ).status_code


def test_the_overview_counts_todays_turns_failures_usage_and_memory_writes(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET, upstream_price_input=1.0, upstream_price_output=2.0)
    upstream.script(Reply(text="one", usage=(100, 10)), Reply(text="two", usage=(200, 20)))
    upstream.script(Fail(500, "boom"))
    assert ask(proxy.url, "a", "first") == 200
    assert ask(proxy.url, "b", "second") == 200
    assert ask(proxy.url, "b", "third") == 500
    memory = proxy.call(lambda: manage.add_memory(proxy.runtime, "A fact added by hand"))
    proxy.call(lambda: manage.edit_memory(proxy.runtime, memory.id, "A fact, edited"))
    counts = proxy.store.daily_counts(since=turnlog.today())[turnlog.today()]
    assert counts[turnlog.REQUESTS] == 3
    assert counts[turnlog.FAILED] == 1
    assert counts[turnlog.PROMPT_TOKENS] == 300
    assert counts[turnlog.COST_MICRO_USD] == 360  # 300 in x $1/M + 30 out x $2/M
    assert counts[turnlog.MEMORIES_ADDED] == 1
    assert counts[turnlog.MEMORIES_UPDATED] == 1
    assert proxy.store.find_session("b").cost_usd == 0.00024
    with bearer_client(proxy) as client:
        page = client.get("/ui").text
    today = page[page.index(f"<td>{turnlog.today()}</td>") :]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", today.split("</tr>")[0], re.S)
    assert "3" in cells[1]  # requests
    assert cells[2] == "330"  # tokens
    assert cells[5] == "1 / 1 / 0"  # memories added / updated / forgotten
    assert cells[8] == "1"  # errors
    assert cells[9] == "$0.0004"
    assert "2 sessions" in page
    assert "1 memory<" in page  # one of a thing in the singular


def test_the_activity_feed_lists_turns_across_sessions_and_polls_for_new_ones(
    proxy_factory: ProxyFactory,
) -> None:
    proxy = proxy_factory(**QUIET)
    assert ask(proxy.url, "feed-one", "hello from one") == 200
    proxy.store.update_session(proxy.store.find_session("feed-one").id, title="Session one")
    with bearer_client(proxy) as client:
        page = client.get("/ui/activity").text
        poll = re.search(r'hx-get="(/ui/activity/live\?after=\d+)"', page)
        assert poll is not None
        assert "Session one" in page
        assert client.get(poll.group(1)).text.count("<tr class") == 0
        assert ask(proxy.url, "feed-two", "hello from two") == 200
        update = client.get(poll.group(1)).text
    assert update.count('<tr class="kind-turn') == 1
    assert "hello from two" in update or "feed-two" in update
    assert 'id="activity-live"' in update
    assert "Session one" not in update
