"""Every answer says what memlane's own stages cost (`Server-Timing`), streamed or not."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from memlane.engine.turn import Turn
from memlane.proxy.answers import _response_headers
from tests.proxy.conftest import QUIET
from tests.support.upstream import ProxyFactory, Reply, ScriptedUpstream

STAGES = ["wait", "shape", "governance", "recall", "render", "upstream"]
UPSTREAM_SECONDS = 0.2


def stages(header: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in header.split(", "):
        name, _, duration = metric.partition(";dur=")
        out[name] = float(duration)
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_carries_memlanes_stages_after_the_upstreams_own(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.respond_with(lambda request: Reply(text="done", latency=UPSTREAM_SECONDS))
    proxy = proxy_factory(**QUIET)
    answer = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}], "stream": stream},
        headers={"x-memlane-session": f"timed-{stream}"},
        timeout=30,
    )
    assert answer.status_code == 200
    found = stages(answer.headers["server-timing"])
    assert list(found) == [f"memlane-{name}" for name in STAGES]
    assert all(ms >= 0 for ms in found.values())
    assert found["memlane-upstream"] >= UPSTREAM_SECONDS * 1000
    mine = sum(ms for name, ms in found.items() if name != "memlane-upstream")
    assert mine < UPSTREAM_SECONDS * 1000  # memlane's stages, not the upstream's wait


async def test_the_upstreams_own_metrics_come_first() -> None:
    turn = Turn(key="k", namespace="", model="m", wire="chat", messages=[])
    turn.clock.mark("shape")
    state: Any = SimpleNamespace(runtime=None)  # nothing is being counted: not read
    upstream = {"Server-Timing": "gpu;dur=12.5", "x-request-id": "r1"}
    relayed = await _response_headers(state, turn, upstream)
    assert relayed["Server-Timing"].startswith("gpu;dur=12.5, memlane-shape;dur=")
    assert "server-timing" not in relayed  # one header, not two
    assert relayed["x-request-id"] == "r1"
