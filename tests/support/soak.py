"""Mixed traffic through a proxy for a while: what a soak test and `benchmarks/soak.py` send.

Four kinds of client run side by side, each in a loop until the time is up:

- `fixed`: one session, the same history every time with a new last question;
- `growing`: one session whose history grows by the answer and a new question each turn
  (started again past `GROW_LIMIT` messages);
- `streaming`: `growing`, streamed;
- `fresh`: a new session every request (concurrent new sessions).

Every request must be answered within `deadline` seconds; one that is not (or that fails)
is counted as an error with its reason.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field

import httpx

KINDS = ("fixed", "growing", "streaming", "fresh")
GROW_LIMIT = 60
"""Messages a growing history reaches before its client starts a new session."""
FIXED_HISTORY = [
    {"role": "system", "content": "You are a careful assistant."},
    *[
        {"role": role, "content": f"{role} line {n} about the proxy and its store"}
        for n in range(4)
        for role in ("user", "assistant")
    ],
]


@dataclass
class Report:
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def max_latency(self) -> float:
        return max(self.latencies, default=0.0)


async def soak(
    url: str,
    *,
    seconds: float,
    per_kind: int = 2,
    deadline: float = 30.0,
    tag: str = "soak",
    report: Report | None = None,
) -> Report:
    """Run `per_kind` clients of each kind against `url` (ending in `/v1`) for `seconds`;
    `report` (filled as requests end, for a watcher to read) is returned."""
    report = report if report is not None else Report()
    stop = time.monotonic() + seconds
    fresh = itertools.count()
    limits = httpx.Limits(max_connections=per_kind * len(KINDS) * 2)
    async with httpx.AsyncClient(timeout=deadline, limits=limits) as client:

        async def one(key: str, messages: list[dict[str, str]], *, stream: bool) -> str:
            body = {"model": "soak-model", "messages": messages, "stream": stream}
            headers = {"X-Memlane-Session": key, "authorization": "Bearer sk-soak"}
            started = time.monotonic()
            try:
                async with asyncio.timeout(deadline):
                    text = await _ask(client, f"{url}/chat/completions", body, headers, stream)
            except Exception as exc:  # a failure or no answer in time: counted, not raised
                report.errors.append(f"{key}: {type(exc).__name__}: {exc}"[:300])
                text = ""
            report.requests += 1
            report.latencies.append(time.monotonic() - started)
            return text

        async def run(kind: str, number: int) -> None:
            key = f"{tag}-{kind}-{number}"
            history: list[dict[str, str]] = []
            turn = 0
            while time.monotonic() < stop:
                turn += 1
                question = {"role": "user", "content": f"{kind} {number} question {turn}"}
                if kind == "fixed":
                    await one(key, [*FIXED_HISTORY, question], stream=False)
                elif kind == "fresh":
                    await one(f"{key}-{next(fresh)}", [question], stream=False)
                else:
                    if len(history) >= GROW_LIMIT:
                        history, key = [], f"{key}+"
                    history.append(question)
                    answer = await one(key, history, stream=kind == "streaming")
                    history.append({"role": "assistant", "content": answer or "(none)"})

        await asyncio.gather(*(run(kind, n) for kind in KINDS for n in range(per_kind)))
    return report


async def _ask(
    client: httpx.AsyncClient,
    endpoint: str,
    body: dict[str, object],
    headers: dict[str, str],
    stream: bool,
) -> str:
    if not stream:
        response = await client.post(endpoint, json=body, headers=headers)
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])
    text = ""
    async with client.stream("POST", endpoint, json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    text += choice.get("delta", {}).get("content") or ""
    if not text:
        raise ValueError("the stream ended without an answer")
    return text
