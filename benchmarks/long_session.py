"""A long agentic session replayed through memlane's proxy: what does the model still see?

Run: .venv/bin/python benchmarks/long_session.py [--requests 1000] [--seed 7] [--windows 8k,128k]

A scripted agentic client (Chat Completions, the whole history resent on every
request, a Codex user agent so the session scaffold applies as it does for real
agents) works through `--requests` requests: tool calls whose outputs are
0.4–10 KB of log-like text, a user message every few steps, and 50 planted
facts of five kinds (file paths, decisions, preferences, numbers, names),
planted across the whole session. Each fact is asked about later, at a known
distance (6 to 500 requests on), in the user's own words: the question names
the topic, never the answer. Every request goes through a real memlane proxy on
loopback to a scripted upstream that records what it receives. The session is
run on an 8k window (`gpt-4`) and a 128k window (`gpt-4o`), each twice:

- the summariser answers: an extractive stand-in that keeps what the summary
  prompt asks a model to keep (decisions, paths, preferences, figures, names,
  the user's instructions) within the summary's token budget, newest first;
- the summariser always fails (HTTP 500): only the verbatim tail, the scaffold
  and the re-injected snippets of dropped history can carry the facts.

Printed per run: requests over the model's limit (counted with the model's real
tokenizer on what the upstream received), tokens forwarded (max / p50) against
the full history, tail fill (at each compaction that drops messages, the
verbatim tail's tokens over what the target left for it after the head, the
snapshot and the recall reserve), the prefix share (bytes of each forwarded
request that repeat the previous forwarded request as its prefix, over the
previous request's size: what a provider prompt cache can reuse), governance
time per request (p50 / p95, measured inside the proxy, LLM calls excluded; and the
CPU time of the request's own thread, what it costs when no core is busy elsewhere:
work handed to other threads, such as a compaction's writes, is not in it),
compactions and summariser calls, and retention: a planted fact is retained
when its exact text (the path, the figure, the name …) is in what the upstream
receives with the question, verbatim in the tail, in the snapshot or in the
recalled snippets. Retention is broken down by kind and by age. Long-term
memory and session indexing are off, so that only governance shapes requests.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.upstream import (  # noqa: E402
    Fail,
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    start_proxy,
)

from memlane.config import Settings  # noqa: E402
from memlane.engine.governance.budget import Budget, context_window  # noqa: E402
from memlane.proxy.wire.chat import parse_message  # noqa: E402
from memlane.text.factory import make_tokenizer  # noqa: E402
from memlane.text.tokens import REPLY_PRIMING  # noqa: E402

WINDOWS = {"8k": "gpt-4", "128k": "gpt-4o"}
"""Window label -> a model whose built-in window it is (8,192 and 128,000 tokens)."""

KINDS = ("path", "decision", "preference", "number", "name")
DISTANCES = (6, 25, 60, 120, 250, 500)
"""How many requests after its planting a fact is asked about."""

# (kind, role, the fact as said in the session, the user's later question, the exact text
# that must reach the model with the question)
FACTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("path", "assistant", "Found it: the rate limiter lives in "
     "src/gateway/limits/token_bucket.py.", "Which file has the rate limiter?",
     "src/gateway/limits/token_bucket.py"),
    ("path", "assistant", "Invoice PDF rendering is done in "
     "services/billing/render/invoice_pdf.py.",
     "Where is the invoice PDF rendering code?", "services/billing/render/invoice_pdf.py"),
    ("path", "assistant", "The feature flags are read from config/flags/production.yaml.",
     "Which file are the feature flags read from?", "config/flags/production.yaml"),
    ("path", "assistant", "Database migrations live under db/migrations/schema_v7/.",
     "Where do the database migrations live?", "db/migrations/schema_v7/"),
    ("path", "assistant", "The webhook signature check is in api/hooks/verify_signature.go.",
     "Where is the webhook signature check?", "api/hooks/verify_signature.go"),
    ("path", "assistant", "Retry backoff for the mailer is implemented in "
     "workers/mailer/backoff.rs.", "Which file implements the mailer retry backoff?",
     "workers/mailer/backoff.rs"),
    ("path", "assistant", "The CI pipeline definition is .ci/pipelines/main_release.yml.",
     "Where is the CI pipeline definition?", ".ci/pipelines/main_release.yml"),
    ("path", "assistant", "Session tokens are minted in auth/tokens/session_minter.ts.",
     "Which file mints the session tokens?", "auth/tokens/session_minter.ts"),
    ("path", "assistant", "The search ranking weights sit in search/ranking/weights_v3.json.",
     "Where are the search ranking weights?", "search/ranking/weights_v3.json"),
    ("path", "assistant", "Norwegian locale strings are in i18n/locales/nb_NO/messages.po.",
     "Where are the Norwegian locale strings?", "i18n/locales/nb_NO/messages.po"),
    ("decision", "assistant", "Decision: the job queue uses PostgreSQL advisory locks instead "
     "of Redis, one service less to run.", "What did we decide for locking in the job queue?",
     "advisory locks"),
    ("decision", "assistant", "Decision: API pagination switches to opaque cursor tokens, not "
     "page numbers.", "How did we decide to paginate the API?", "opaque cursor tokens"),
    ("decision", "assistant", "Decision: uploaded images go to object storage behind a CDN, "
     "never the app server's disk.", "Where did we decide uploaded images go?",
     "object storage behind a CDN"),
    ("decision", "assistant", "Decision: the protobuf schema is pinned and we forbid field "
     "renumbering.", "What did we decide about the protobuf schema?",
     "forbid field renumbering"),
    ("decision", "assistant", "Decision: nightly reports come from a cron job at 02:30 UTC, not "
     "on demand.", "How are the nightly reports produced, as we decided?", "02:30 UTC"),
    ("decision", "assistant", "Decision: the mobile app talks to the backend through GraphQL "
     "persisted queries only.", "What did we decide for how the mobile app talks to the backend?",
     "GraphQL persisted queries"),
    ("decision", "assistant", "Decision: password hashing moves to argon2id with a 64 MiB memory "
     "cost.", "Which password hashing did we decide on?", "argon2id"),
    ("decision", "assistant", "Decision: the monolith's billing module is extracted first, the "
     "catalogue later.", "Which module did we decide to extract from the monolith first?",
     "billing module is extracted first"),
    ("decision", "assistant", "Decision: logs are shipped as JSON lines over OTLP; the syslog "
     "relay goes.", "How did we decide to ship logs?", "JSON lines over OTLP"),
    ("decision", "assistant", "Decision: feature branches are squash-merged; merge commits are "
     "not allowed.", "Which merge strategy did we decide on for feature branches?",
     "squash-merged"),
    ("preference", "user", "I prefer tabs for indentation in this repo.",
     "What is my indentation preference?", "tabs for indentation"),
    ("preference", "user", "Please always write commit messages in the imperative mood.",
     "How do I like commit messages written?", "imperative mood"),
    ("preference", "user", "I like tests named after the behaviour they check, like "
     "test_refund_is_capped.", "How do I like tests named?", "named after the behaviour"),
    ("preference", "user", "I prefer British spelling in user-facing text.",
     "Which spelling do I prefer in user-facing text?", "British spelling"),
    ("preference", "user", "Keep functions under forty lines where you can; long functions are "
     "hard for me to review.", "How long do I like functions to be?", "under forty lines"),
    ("preference", "user", "For structured data I'd rather use dataclasses than dicts.",
     "What do I prefer for structured data?", "dataclasses than dicts"),
    ("preference", "user", "Please put type hints on every public function.",
     "What is my preference on type hints?", "type hints on every public function"),
    ("preference", "user", "I prefer small pull requests, one concern each.",
     "What size of pull requests do I prefer?", "one concern each"),
    ("preference", "user", "Use ISO 8601 dates in every log line, please.",
     "Which date format do I want in log lines?", "ISO 8601"),
    ("preference", "user", "Error messages should tell the user what to do next; that is how I "
     "want them.", "How do I want error messages written?", "what to do next"),
    ("number", "user", "The staging database listens on port 6432.",
     "Which port does the staging database listen on?", "port 6432"),
    ("number", "user", "Our p99 latency budget for checkout is 450 ms.",
     "What is the checkout latency budget?", "450 ms"),
    ("number", "user", "The nightly batch processes about 2,750,000 rows.",
     "How many rows does the nightly batch process?", "2,750,000"),
    ("number", "user", "The connection pool size for the API is 37.",
     "What connection pool size does the API use?", "API is 37"),
    ("number", "user", "The backups bucket keeps 90 days of backups.",
     "How many days of backups does the bucket keep?", "90 days"),
    ("number", "user", "The maximum upload size is 25 MiB.",
     "What is the maximum upload size?", "25 MiB"),
    ("number", "user", "Product pages are cached with a TTL of 300 seconds.",
     "What TTL do product pages get?", "300 seconds"),
    ("number", "user", "We run 12 worker replicas in production.",
     "How many worker replicas run in production?", "12 worker replicas"),
    ("number", "user", "The free tier allows 1,000 API calls per day.",
     "How many API calls per day does the free tier allow?", "1,000 API calls"),
    ("number", "user", "The tax rate table is at version 2026.3.",
     "Which version is the tax rate table at?", "2026.3"),
    ("name", "user", "The on-call reviewer for payments is Ingrid Solberg.",
     "Who is the on-call reviewer for payments?", "Ingrid Solberg"),
    ("name", "user", "Our product owner is Tomasz Wieczorek.",
     "Who is our product owner?", "Tomasz Wieczorek"),
    ("name", "user", "The security contact is Amara Okafor.",
     "Who is the security contact?", "Amara Okafor"),
    ("name", "user", "The design system is maintained by Kenji Watanabe.",
     "Who maintains the design system?", "Kenji Watanabe"),
    ("name", "user", "Release approvals go through Lucía Fernández.",
     "Who handles release approvals?", "Lucía Fernández"),
    ("name", "user", "The database admin is Priya Raman.",
     "Who is the database admin?", "Priya Raman"),
    ("name", "user", "Customer escalations go to Olu Adeyemi.",
     "Who do customer escalations go to?", "Olu Adeyemi"),
    ("name", "user", "The mobile lead is Sofie Lindqvist.",
     "Who is the mobile lead?", "Sofie Lindqvist"),
    ("name", "user", "Infrastructure budget questions go to Marco Bellini.",
     "Who takes infrastructure budget questions?", "Marco Bellini"),
    ("name", "user", "The data protection officer is Hannah Becker.",
     "Who is the data protection officer?", "Hannah Becker"),
)  # fmt: skip

TOPICS: tuple[str, ...] = (
    "the rate limiter",
    "invoice PDF rendering",
    "the feature flags",
    "the database migrations",
    "the webhook signature check",
    "the mailer retry backoff",
    "the CI pipeline",
    "the session tokens",
    "the search ranking weights",
    "the Norwegian locale strings",
    "locking in the job queue",
    "API pagination",
    "uploaded images",
    "the protobuf schema",
    "the nightly reports",
    "how the mobile app talks to the backend",
    "password hashing",
    "extracting modules from the monolith",
    "shipping logs",
    "the merge strategy for feature branches",
    "indentation",
    "commit messages",
    "test names",
    "spelling in user-facing text",
    "function length",
    "structured data",
    "type hints",
    "pull request size",
    "dates in log lines",
    "error messages",
    "the staging database",
    "the checkout latency budget",
    "the nightly batch",
    "the API connection pool",
    "the backups bucket",
    "the upload size limit",
    "caching product pages",
    "the worker replicas",
    "the free tier",
    "the tax rate table",
    "payments reviews",
    "the product owner",
    "the security contact",
    "the design system",
    "release approvals",
    "the database admin",
    "customer escalations",
    "the mobile lead",
    "infrastructure budget questions",
    "data protection",
)
"""What each fact is about, in the order of `FACTS`: mentioned again later without the answer
(distractors recall must see past)."""

LOG_WORDS = (
    "INFO DEBUG WARN worker scheduler batch processed queued retried flushed cache hit miss "
    "request handler latency ms bytes connection pool acquired released shard replica "
    "compaction segment index build step module test passed skipped fixture import"
).split()


@dataclass(frozen=True)
class Fact:
    kind: str
    role: str
    text: str
    question: str
    needle: str
    topic: str
    planted: int
    asked: int
    distance: int
    """The distance the question was meant to come at (`asked` may be a request or two
    later when another question already took that request)."""


def plan_facts(requests: int) -> list[Fact]:
    """50 facts planted across the session, the kinds interleaved; each asked at a distance."""
    order = [
        (*FACTS[kind * 10 + i], TOPICS[kind * 10 + i])
        for i in range(10)
        for kind in range(len(KINDS))
    ]
    last = requests - 2
    spacing = (last - 10) / len(order)
    facts: list[Fact] = []
    taken: set[int] = set()
    for n, (kind, role, text, question, needle, topic) in enumerate(order):
        planted = 5 + int(n * spacing)
        wanted = DISTANCES[(n * 5 + n // 6) % len(DISTANCES)]
        fitting = [d for d in DISTANCES if planted + d <= last] or [last - planted]
        distance = wanted if wanted in fitting else max(fitting)
        asked = planted + distance
        while asked in taken or asked == planted:
            asked += 1 if asked < last else -1
        taken.add(asked)
        facts.append(Fact(kind, role, text, question, needle, topic, planted, asked, distance))
    return facts


def tool_output(rng: random.Random, size: int) -> str:
    lines = []
    total = 0
    while total < size:
        words = " ".join(rng.choices(LOG_WORDS, k=rng.randint(6, 12)))
        stamp = f"2026-11-21T10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        line = f"{stamp} {words} id={rng.randint(1000, 99999)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def output_size(rng: random.Random) -> int:
    """0.4–10 KB, log-uniform (most outputs are small, a few are large)."""
    return int(400 * (25 ** rng.random()))


def build_session(requests: int, facts: Sequence[Fact], seed: int) -> list[list[dict[str, Any]]]:
    """What the client appends before each request (one list of messages per request)."""
    rng = random.Random(seed)
    planted = {f.planted: f for f in facts}
    asked = {f.asked: f for f in facts}
    mentions: dict[int, list[str]] = {}
    for fact in facts:  # the topic comes up twice more without the answer, once before the question
        for high in (fact.asked - 1, requests - 1):
            at = rng.randint(fact.planted + 1, max(fact.planted + 1, high))
            mentions.setdefault(at, []).append(
                f"While on this step I looked at {fact.topic} again; nothing to change there."
            )
    turns: list[list[dict[str, Any]]] = [
        [
            {"role": "system", "content": "You are a coding agent working in a repository."},
            {"role": "user", "content": "Let's modernise the platform step by step."},
            {"role": "assistant", "content": "Sure. I will start by reading the code."},
        ]
    ]
    for turn in range(1, requests):
        items: list[dict[str, Any]] = []
        if turn - 1 in asked:  # the model answered the question the request before
            items.append({"role": "assistant", "content": "Answered that; back to the plan."})
        new = planted.get(turn)
        if new is not None:
            items.append({"role": new.role, "content": new.text})
        for text in mentions.get(turn, []):
            items.append({"role": "assistant", "content": text})
        question = asked.get(turn)
        if question is not None:
            items.append({"role": "user", "content": question.question})
        elif new is None and turn % 7 == 0:
            items.append({"role": "user", "content": f"Continue with step {turn} of the plan."})
        if turn % 5 == 0 and not items:
            items.append({"role": "assistant", "content": f"Step {turn} done; moving on."})
        if question is None:
            call_id = f"call_{turn}"
            tool = rng.choice(["run_tests", "read_file", "grep", "shell"])
            items.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool, "arguments": json.dumps({"step": turn})},
                        }
                    ],
                }
            )
            items.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": tool_output(rng, output_size(rng)),
                }
            )
        turns.append(items)
    return turns


# What a summary model is asked to keep (summarise.SUMMARY_PROMPT), recognised by its form.
KEEP = re.compile(
    r"(Decision:|\bprefer|\bI like|\bI'd rather|\bPlease\b|\bwant\b|\w+/\w+\.\w+|\w+/\w+/"
    r"|\d[\d,.]*\s*(?:ms|MiB|rows|days|seconds|replicas|API)|\bport \d+|version \d"
    r"|\b[A-Z][a-zà-ÿ]+ [A-Z][a-zà-ÿ]+\b)"
)
BOILERPLATE = re.compile(
    r"^(assistant: Step \d+ done|user: Continue with step|assistant: Answered)"
)


def stand_in_summary(request: RecordedRequest) -> Reply | None:
    """The extractive stand-in: previous snapshot plus the removed lines worth keeping,
    newest kept first when they do not all fit the summary's `max_tokens` (~4 chars each)."""
    body = request.json or {}
    messages = body.get("messages") or []
    prompt = str((messages[-1] if messages else {}).get("content") or "")
    if "<removed_messages>" not in prompt:
        return None
    previous = prompt.split("<previous_snapshot>")[1].split("</previous_snapshot>")[0].strip()
    removed = prompt.split("<removed_messages>")[1].split("</removed_messages>")[0]
    kept = [
        line[:300]
        for line in removed.splitlines()
        if KEEP.search(line) and "returned:" not in line and not BOILERPLATE.match(line)
    ]
    lines = [] if previous in ("", "(none)") else previous.splitlines()
    lines += kept
    room = int(body.get("max_tokens") or body.get("max_completion_tokens") or 1_500) * 4 - 60
    chosen: list[str] = []
    for line in reversed(lines):
        if sum(len(x) + 1 for x in chosen) + len(line) > room:
            break
        chosen.insert(0, line)
    return Reply(text="<state_snapshot>\n" + "\n".join(chosen) + "\n</state_snapshot>")


def failing_summary(request: RecordedRequest) -> Reply | Fail | None:
    if stand_in_summary(request) is None:
        return None
    return Fail(500, "summariser down")


@dataclass
class Collected(logging.Handler):
    """Governance's own figures, from the debug record it logs per request."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    """CPU time of the request's own thread: the cost without waiting for a busy core."""
    compactions: int = 0
    summariser_calls: int = 0
    tail_fill: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        stats = getattr(record, "governance", None)
        if stats is None:
            return
        self.seconds.append(float(getattr(record, "governance_seconds", 0.0)))
        self.cpu_seconds.append(float(getattr(record, "governance_cpu_seconds", 0.0)))
        self.compactions += int(stats.compacted)
        self.summariser_calls += stats.summariser_calls
        if stats.dropped and stats.tail_budget:
            self.tail_fill.append(min(1.0, stats.tail_tokens / stats.tail_budget))

    def __hash__(self) -> int:
        return id(self)


def common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    low, high = 0, size
    while low < high:  # binary search on equal prefixes: fast on multi-MB bodies
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def where_found(messages: Sequence[dict[str, Any]], needle: str) -> str | None:
    """Which part of the forwarded request carries the needle: tail, snapshot or recall."""
    for message in messages:
        text = str(message.get("content") or "")
        if needle not in text:
            continue
        if text.startswith("[memlane: summary of"):
            return "snapshot"
        if "<memlane_recall>" in text:
            return "recall"
        if "<memlane_state>" in text:
            return "scaffold"
        return "verbatim"
    return None


@dataclass
class Result:
    label: str
    window: int
    limit: int
    requests: int
    over_budget: int
    forwarded: list[int]
    full: list[int]
    prefix: list[float]
    handler: Collected
    found: dict[Fact, str | None]
    seconds: float

    def retention(self, facts: Sequence[Fact]) -> float:
        return sum(self.found[f] is not None for f in facts) / len(facts) if facts else 0.0


def run(
    turns: list[list[dict[str, Any]]],
    facts: Sequence[Fact],
    *,
    model: str,
    summariser: Callable[[RecordedRequest], Reply | Fail | None],
    label: str,
    overrides: dict[str, str] | None = None,
) -> Result:
    upstream = ScriptedUpstream()
    upstream.start()
    home = Path(tempfile.mkdtemp(prefix="memlane-bench-"))
    values: dict[str, Any] = {
        "home": home,
        "upstream_url": upstream.url,
        "memory_enabled": False,
        "index_enabled": False,
        "embedding_backend": "hashing",
        "max_body_bytes": 256 * 1024 * 1024,
        **(overrides or {}),
    }
    settings = Settings(**values)
    proxy = start_proxy(settings)
    handler = Collected()
    logger = logging.getLogger("memlane.governance")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    upstream.respond_with(summariser)
    tokenizer = make_tokenizer(settings, model)
    budget = Budget.of(settings, context_window(settings, None, model))
    asked = {f.asked: f for f in facts}
    history: list[dict[str, Any]] = []
    history_tokens = 0
    forwarded: list[int] = []
    full: list[int] = []
    prefix: list[float] = []
    found: dict[Fact, str | None] = {}
    previous: bytes | None = None
    over_budget = 0
    started = time.perf_counter()
    headers = {"x-memlane-session": "bench", "user-agent": "codex_cli_rs/0.50 (bench)"}
    with httpx.Client(timeout=120) as client:
        for number, items in enumerate(turns):
            history.extend(items)
            history_tokens += sum(tokenizer.count_message(parse_message(m, "")) for m in items)
            before = len(upstream.model_requests)
            response = client.post(
                f"{proxy.url}/chat/completions",
                json={"model": model, "messages": history},
                headers=headers,
            )
            if response.status_code != 200:
                raise SystemExit(f"request {number} failed: {response.status_code} {response.text}")
            sent = [r for r in upstream.model_requests[before:] if stand_in_summary(r) is None][-1]
            messages = sent.json["messages"]
            tokens = REPLY_PRIMING + sum(
                tokenizer.count_message(parse_message(m, "")) for m in messages
            )
            forwarded.append(tokens)
            full.append(history_tokens)
            over_budget += tokens > budget.limit
            body = json.dumps(messages, sort_keys=True).encode()
            if previous is not None:
                prefix.append(common_prefix(previous, body) / len(previous))
            previous = body
            fact = asked.get(number)
            if fact is not None:
                found[fact] = where_found(messages, fact.needle)
            upstream.requests.clear()  # bodies of MBs each: keep only this request's
    elapsed = time.perf_counter() - started
    proxy.stop()
    upstream.stop()
    logger.removeHandler(handler)
    return Result(
        label=label,
        window=budget.window.tokens,
        limit=budget.limit,
        requests=len(turns),
        over_budget=over_budget,
        forwarded=forwarded,
        full=full,
        prefix=prefix,
        handler=handler,
        found=found,
        seconds=elapsed,
    )


def pct(value: float) -> str:
    return f"{value:.0%}" if value in (0.0, 1.0) else f"{value:.1%}"


def report(results: Sequence[Result], facts: Sequence[Fact]) -> None:
    print("| window | summariser | over budget | forwarded max / p50 | full history max "
          "| tail fill p50 / min | prefix share p50 / mean | governance p50 / p95 "
          "| its CPU p50 / p95 | compactions / summariser calls | retention | wall |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        fill = r.handler.tail_fill
        print(
            f"| {r.label} | {r.over_budget} of {r.requests} "
            f"| {max(r.forwarded):,} / {statistics.median(r.forwarded):,.0f} | {max(r.full):,} "
            f"| {pct(statistics.median(fill)) if fill else '-'} / "
            f"{pct(min(fill)) if fill else '-'} "
            f"| {pct(statistics.median(r.prefix))} / {pct(statistics.fmean(r.prefix))} "
            f"| {percentile(r.handler.seconds, 0.5) * 1000:.1f} ms / "
            f"{percentile(r.handler.seconds, 0.95) * 1000:.1f} ms "
            f"| {percentile(r.handler.cpu_seconds, 0.5) * 1000:.1f} ms / "
            f"{percentile(r.handler.cpu_seconds, 0.95) * 1000:.1f} ms "
            f"| {r.handler.compactions} / {r.handler.summariser_calls} "
            f"| {r.retention(facts):.0%} | {r.seconds:.0f} s |"
        )
    print()
    names = " | ".join(r.label.replace(" | ", ", ") for r in results)
    print(f"| retention by kind | {names} |")
    print("| --- |" + " --- |" * len(results))
    for kind in KINDS:
        subset = [f for f in facts if f.kind == kind]
        cells = " | ".join(f"{r.retention(subset):.0%}" for r in results)
        print(f"| {kind} ({len(subset)}) | {cells} |")
    print()
    print(f"| retention by age (requests between fact and question) | {names} |")
    print("| --- |" + " --- |" * len(results))
    for distance in sorted({f.distance for f in facts}):
        subset = [f for f in facts if f.distance == distance]
        cells = " | ".join(f"{r.retention(subset):.0%}" for r in results)
        print(f"| {distance} ({len(subset)}) | {cells} |")
    print()
    print(f"| where the fact was | {names} |")
    print("| --- |" + " --- |" * len(results))
    for place in ("verbatim", "snapshot", "recall", "scaffold", None):
        cells = " | ".join(str(sum(v == place for v in r.found.values())) for r in results)
        print(f"| {place or 'missing'} | {cells} |")


def aims(results: Sequence[Result], facts: Sequence[Fact]) -> list[str]:
    """The aims, checked: one line each, `ok` or `MISSED`."""
    lines = []
    for r in results:
        fill = statistics.median(r.handler.tail_fill) if r.handler.tail_fill else 0.0
        p95 = percentile(r.handler.seconds, 0.95) * 1000
        retention = r.retention(facts)
        if r.window >= 100_000:
            checks = [("retention ≥ 95%", retention >= 0.95)] if "fails" in r.label else []
            checks += [
                ("prefix share ≥ 97%", statistics.median(r.prefix) >= 0.97),
                ("governance p95 ≤ 10 ms", p95 <= 10.0),
            ]
        else:
            checks = [
                ("retention ≥ 80%", retention >= 0.8),
                ("tail fill ≥ 80%", fill >= 0.8),
                ("no request over budget", r.over_budget == 0),
            ]
        for name, ok in checks:
            lines.append(f"- {r.label}: {name}: {'ok' if ok else 'MISSED'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1_000, help="requests in the session")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--windows", default="8k,128k", help="comma-separated: 8k, 128k")
    parser.add_argument(
        "--summariser", default="answers,fails", help="comma-separated: answers, fails"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="a memlane setting for every run, e.g. governance_recall_snippets=0",
    )
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    if args.requests < 520:
        raise SystemExit("--requests must be at least 520 (facts are asked up to 500 later)")
    facts = plan_facts(args.requests)
    turns = build_session(args.requests, facts, args.seed)
    results = []
    for window in args.windows.split(","):
        for mode in args.summariser.split(","):
            answer = stand_in_summary if mode == "answers" else failing_summary
            label = f"{window} | {'answers' if mode == 'answers' else 'always fails'}"
            result = run(
                turns,
                facts,
                model=WINDOWS[window],
                summariser=answer,
                label=label,
                overrides=overrides,
            )
            results.append(result)
            print(f"done: {label} ({results[-1].seconds:.0f} s)", file=sys.stderr)
    print(
        f"{args.requests} requests, {len(facts)} planted facts ({len(KINDS)} kinds × 10), "
        f"asked {', '.join(map(str, DISTANCES))} requests later\n"
    )
    report(results, facts)
    print()
    print("\n".join(aims(results, facts)))


if __name__ == "__main__":
    main()
