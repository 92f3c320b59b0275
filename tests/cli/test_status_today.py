"""`memlane status` counts today's turns from the store: every process's, not one proxy's."""

from __future__ import annotations

import json

import httpx
from typer.testing import CliRunner

from memlane.cli.app import app
from tests.proxy.conftest import QUIET
from tests.support.upstream import Fail, ProxyFactory, Reply, ScriptedUpstream


def test_status_counts_the_turns_another_process_served_today(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)  # no serve.json: status cannot ask it, only the store
    upstream.script(Reply(text="ok"), Fail(500, "boom"))
    with httpx.Client(base_url=proxy.url, headers={"x-memlane-session": "st"}, timeout=30) as c:
        for text in ("one", "two"):
            body = {"model": "scripted-small", "messages": [{"role": "user", "content": text}]}
            c.post("/chat/completions", json=body)
    proxy.drain()

    home = str(proxy.settings.home_path)
    report = json.loads(CliRunner().invoke(app, ["--home", home, "status", "--json"]).stdout)
    assert report["running"] is False
    assert report["today"] == {"requests": 2, "failed_requests": 1, "compactions": 0}
    text = CliRunner().invoke(app, ["--home", home, "status"]).stdout
    assert "today     2 turns, 1 failed, 0 compactions" in text
