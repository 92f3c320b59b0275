"""A soak of mixed traffic through the real proxy: every request is answered in time.

Fixed-prompt, growing-history, streamed and new-session clients run at once for
`SECONDS` against a proxy with the defaults (memory on, its own LLM calls answered by
the same scripted upstream). Each request must be answered within `DEADLINE` (far
past memlane's own bound, `request_wait_seconds`); no wait on memlane's own work may
reach that bound; the background work the traffic caused drains.
`benchmarks/soak.py` runs the same traffic for ten minutes against `memlane serve`.
"""

from __future__ import annotations

import asyncio

from tests.support.soak import KINDS, soak
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

SECONDS = 25.0
DEADLINE = 30.0


def test_mixed_traffic_for_a_while_leaves_no_request_unanswered(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    def answer(request: RecordedRequest) -> Reply:
        last = request.messages[-1].get("content") if request.messages else ""
        return Reply(text=f"answer to {str(last)[:60]}", latency=0.01)

    upstream.respond_with(answer)
    proxy = proxy_factory(memory_batch_quiet_seconds=0.5)

    report = asyncio.run(soak(proxy.url, seconds=SECONDS, per_kind=2, deadline=DEADLINE))

    assert report.errors == []
    assert report.requests >= len(KINDS) * 2 * 3  # every client got through several turns
    proxy.drain(timeout=60)
    # no wait on memlane's own work (a session's earlier writes, a store) reached its bound
    assert "wait" not in proxy.runtime.activity.snapshot()["failures"]
