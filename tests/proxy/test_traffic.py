"""A turn is in memlane's hands while memlane works on it, not while the upstream answers."""

from __future__ import annotations

import pytest

from memlane.engine import threads
from tests.proxy.conftest import QUIET, sdk
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream


@pytest.mark.parametrize("stream", [False, True])
def test_background_work_may_run_while_the_upstream_answers_and_nothing_stays_in_hand(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, stream: bool
) -> None:
    proxy = proxy_factory(**QUIET)
    seen: list[bool] = []

    def answer(request: RecordedRequest) -> Reply:
        seen.append(threads.TRAFFIC.busy)  # the proxy runs in this process
        return Reply(text="done")

    upstream.respond_with(answer)
    client = sdk(proxy, "traffic")
    messages = [{"role": "user", "content": "hello"}]
    if stream:
        chunks = client.chat.completions.create(model="m", messages=messages, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        reply = client.chat.completions.create(model="m", messages=messages)
        text = reply.choices[0].message.content or ""
    assert text == "done"
    assert seen == [False]
    proxy.drain()
    assert not threads.TRAFFIC.busy
