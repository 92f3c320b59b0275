"""Memory across sessions: does a new session know what earlier ones learned, per project?

Run: .venv/bin/python benchmarks/cross_session.py [--quick] [--set MEMLANE_NAME=value ...]

Four projects (four temporary git repositories this script makes) and 20 sessions, all
through a real memlane proxy (`memlane serve`, its own process on loopback, default
settings unless `--set`), each session as a real client sends it:

- Codex-shaped: the Responses API, streamed, the session in `prompt_cache_key`, and the
  working directory in a user input item `<environment_context><cwd>…</cwd>…`;
- Claude-Code-shaped: Anthropic Messages (`?beta=true`), streamed, `x-claude-code-session-id`,
  and `Working directory: …` in the system prompt's `<env>` block;
- plain: Chat Completions with `X-Memlane-Session` and no project at all.

No `X-Memlane-Repo` is ever sent: the project is whatever memlane detects from what the
client sends. Sessions of one project alternate between Codex and Claude Code.

40 facts are planted: 6 per project (24 about the project: deploy target, CI server, …)
and 16 about the user (editor, dog, …), one user message per fact, in 8 project sessions
(3 project facts + 1 user fact each) and 2 plain sessions (4 user facts each). Scripted
upstreams (OpenAI- and Anthropic-compatible, in this process) answer the conversation
with "OK." and answer memlane's own extraction calls (recognised by FACT_PROMPT, on
whichever upstream memlane sends them to) with the facts planted in each message, each
labelled `about: user` or `about: project`. Every fact carries a made-up token, so finding
it in a forwarded request is a string search.

Then 10 new sessions ask (8 project sessions, 2 per project, and 2 plain), one question per
fact, never naming the token: each project session asks its project's 6 facts and half of
the user facts (the project's two sessions cover all 16), each plain session half of the
user facts. Printed:

- project facts recalled in a later session of the same project (forwarded request holds
  the fact), aim >= 95%;
- user facts recalled in sessions of every project (each user fact asked once in each
  project and once with no project), aim >= 95%;
- project facts that leak: a forwarded request of one project (or of a plain session)
  holding a fact of another project, counted over every forwarded request, aim 0;
- what memlane added to the asking requests, p50/p95, from its `Server-Timing`: the recall
  stage alone, and every memlane stage (all but the upstream's).

`--quick` asks fewer questions per session (3 project facts, 4 user facts): under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scripted upstreams live in tests/support

from benchmarks.proxy_overhead import free_port, wait_for_background, wait_healthy  # noqa: E402

PROJECT_TOPICS = [
    ("The project deploys to {t}", "Where does the project deploy to?"),
    ("The project's CI server is {t}", "Which CI server does the project use?"),
    ("The project's database is called {t}", "What is the project's database called?"),
    ("The project's tests run with the {t} command", "Which command runs the project's tests?"),
    ("The project's release branch is {t}", "Which release branch does the project use?"),
    ("The project's settings live in the {t} file", "Which file holds the project's settings?"),
]
USER_TOPICS = [
    ("The user's editor is {t}", "Which editor do I use?"),
    ("The user's dog is named {t}", "What is my dog named?"),
    ("The user's timezone is {t}", "What is my timezone?"),
    ("The user's manager is called {t}", "What is my manager called?"),
    ("The user drinks {t} coffee", "What coffee do I drink?"),
    ("The user types on a {t} keyboard", "Which keyboard do I type on?"),
    ("The user lives in {t}", "Where do I live?"),
    ("The user's favourite programming language is {t}", "What is my favourite language?"),
    ("The user's shell is {t}", "Which shell do I use?"),
    ("The user climbs at {t} gym", "Which gym do I climb at?"),
    ("The user's sister is named {t}", "What is my sister named?"),
    ("The user rides a {t} bike", "Which bike do I ride?"),
    ("The user's laptop is a {t}", "Which laptop do I have?"),
    ("The user indents code with {t}", "How do I indent code?"),
    ("The user's colour theme is {t}", "Which colour theme do I use?"),
    ("The user's favourite band is {t}", "What is my favourite band?"),
]
SYLLABLES = ["zor", "vak", "quil", "lon", "bre", "tix", "mun", "dra", "pel", "sko", "fen", "yar"]
ANSWER = "OK."


@dataclass(frozen=True)
class Fact:
    text: str
    question: str
    token: str
    about: str
    """`user` or `project`."""
    project: int | None
    """The project a project fact belongs to."""


@dataclass
class Session:
    client: str
    """`codex`, `claude` or `plain`."""
    project: int | None
    key: str = field(default_factory=lambda: str(uuid.uuid4()))
    history: list[tuple[str, str]] = field(default_factory=list)
    """(user text, answer) of the turns so far: every turn resends them, as clients do."""


def token(n: int) -> str:
    a, b, c = SYLLABLES[n % 12], SYLLABLES[(n * 5 + 3) % 12], SYLLABLES[(n * 7 + 1) % 12]
    return f"{a}{b}{c}{4100 + n * 37}"


def planted() -> list[Fact]:
    facts = [
        Fact(text.format(t=token(p * 10 + i)), q, token(p * 10 + i), "project", p)
        for p in range(4)
        for i, (text, q) in enumerate(PROJECT_TOPICS)
    ]
    facts += [
        Fact(text.format(t=token(100 + i)), q, token(100 + i), "user", None)
        for i, (text, q) in enumerate(USER_TOPICS)
    ]
    return facts


# --- the scripted upstreams ---------------------------------------------------------

MESSAGE = re.compile(r"User message (\d+), written on [^\n]*\n<<<\n(.*?)\n>>>", re.S)


def upstream_answer(facts: list[Fact]) -> Any:
    """Answer memlane's own calls (by their prompts) and the conversation (`ANSWER`)."""
    from tests.support.scripted import RecordedRequest, Reply

    from memlane.engine.memory.extract import FACT_PROMPT
    from memlane.engine.memory.reconcile import RECONCILE_PROMPT
    from memlane.engine.sessions.indexing import INDEX_PROMPT

    metadata = '{"name": "bench", "description": "A session.", "summary": "Work.", "tags": []}'

    def answer(request: RecordedRequest) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        system = body.get("system")
        if system is None and request.messages:
            system = request.messages[0].get("content")
        if system == FACT_PROMPT:
            said = str(request.messages[-1].get("content", ""))
            found = [
                {"message": int(n), "fact": f.text, "about": f.about}
                for n, text in MESSAGE.findall(said)
                for f in facts
                if f.token in text
            ]
            return Reply(text=json.dumps(found))
        if system == INDEX_PROMPT:
            return Reply(text=metadata)
        if system == RECONCILE_PROMPT:  # nothing to decide: the new facts are added
            return Reply(text="[]")
        return Reply(text=ANSWER)

    return answer


@contextmanager
def upstreams(facts: list[Fact]) -> Iterator[tuple[Any, Any]]:
    from tests.support.anthropic_upstream import ScriptedAnthropic
    from tests.support.upstream import ScriptedUpstream

    openai, claude = ScriptedUpstream(), ScriptedAnthropic()
    for server in (openai, claude):
        server.start()
        server.respond_with(upstream_answer(facts))
    try:
        yield openai, claude
    finally:
        openai.stop()
        claude.stop()


@contextmanager
def memlane(openai_url: str, claude_base: str, home: Path, extra: dict[str, str]) -> Iterator[str]:
    """`memlane serve` on a free loopback port, as a user starts it; its base URL (no /v1)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))}
    env |= {"MEMLANE_LOG_LEVEL": "warning", "MEMLANE_ANTHROPIC_UPSTREAM_URL": claude_base}
    env |= extra
    command = [str(ROOT / ".venv/bin/memlane"), "--home", str(home), "serve", "--port", str(port)]
    command += ["--upstream", openai_url]
    process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    try:
        yield wait_healthy(f"http://127.0.0.1:{port}", process.kill).removesuffix("/v1")
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


# --- the clients, as they send -------------------------------------------------------


def environment_context(cwd: Path) -> str:
    """The item the Codex CLI puts before the user's first message."""
    return (
        "<environment_context>\n"
        f"  <cwd>{cwd}</cwd>\n"
        "  <approval_policy>on-request</approval_policy>\n"
        "  <sandbox_mode>workspace-write</sandbox_mode>\n"
        "  <network_access>restricted</network_access>\n"
        "  <shell>bash</shell>\n"
        "</environment_context>"
    )


def claude_system(cwd: Path) -> list[dict[str, str]]:
    """Claude Code's system prompt: its identity, then the environment block."""
    env = (
        "Here is useful information about the environment you are running in:\n<env>\n"
        f"Working directory: {cwd}\nIs directory a git repo: Yes\nPlatform: linux\n"
        "OS Version: Linux 6.1.0\nToday's date: 2026-11-28\n</env>"
    )
    return [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"type": "text", "text": "You are an interactive CLI tool that helps users.\n\n" + env},
    ]


def request(
    session: Session, text: str, repos: list[Path]
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(path, body, headers) of the session's next turn saying `text`."""
    turns = [*session.history, (text, "")]
    if session.client == "codex":
        cwd = repos[session.project or 0]
        items: list[dict[str, Any]] = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": environment_context(cwd)}],
            }
        ]
        for said, answered in turns:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": said}],
                }
            )
            if answered:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": answered}],
                    }
                )
        body = {
            "model": "gpt-5-codex",
            "instructions": "You are Codex, a coding agent.",
            "input": items,
            "tools": [],
            "store": False,
            "stream": True,
            "prompt_cache_key": session.key,
        }
        headers = {
            "authorization": "Bearer sk-bench-codex",
            "user-agent": "codex_cli_rs/0.63.0 (Debian 12; x86_64) bench",
            "originator": "codex_cli_rs",
            "session_id": session.key,
        }
        return "/v1/responses", body, headers
    if session.client == "claude":
        messages: list[dict[str, Any]] = []
        for said, answered in turns:
            messages.append({"role": "user", "content": [{"type": "text", "text": said}]})
            if answered:
                messages.append(
                    {"role": "assistant", "content": [{"type": "text", "text": answered}]}
                )
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 1024,
            "system": claude_system(repos[session.project or 0]),
            "messages": messages,
            "metadata": {"user_id": json.dumps({"session_id": session.key})},
            "stream": True,
        }
        headers = {
            "x-api-key": "sk-ant-bench",
            "anthropic-version": "2023-06-01",
            "user-agent": "claude-cli/2.1.0 (external, cli)",
            "x-claude-code-session-id": session.key,
        }
        return "/v1/messages?beta=true", body, headers
    chat: list[dict[str, str]] = []
    for said, answered in turns:
        chat.append({"role": "user", "content": said})
        if answered:
            chat.append({"role": "assistant", "content": answered})
    headers = {"authorization": "Bearer sk-bench-plain", "x-memlane-session": session.key}
    return "/v1/chat/completions", {"model": "gpt-4.1-mini", "messages": chat}, headers


def timings(header: str) -> dict[str, float]:
    """memlane's stages from a `Server-Timing` header, in milliseconds."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";dur=")
        if name.startswith("memlane-") and rest:
            out[name.removeprefix("memlane-")] = float(rest)
    return out


def say(
    client: httpx.Client, base: str, session: Session, text: str, repos: list[Path]
) -> dict[str, float]:
    """One turn of `session`; memlane's stage timings for it."""
    path, body, headers = request(session, text, repos)
    with client.stream("POST", base + path, json=body, headers=headers) as response:
        response.read()
        if response.status_code != 200:
            raise SystemExit(
                f"{session.client} request failed: {response.status_code} {response.text[:300]}"
            )
        stages = timings(response.headers.get("server-timing", ""))
    session.history.append((text, ANSWER))
    return stages


# --- the run -------------------------------------------------------------------------


def make_repos(root: Path) -> list[Path]:
    repos = []
    for name in ("atlas", "beacon", "cinder", "delta"):
        repo = root / "work" / name
        (repo / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "README.md").write_text(f"# {name}\n")
        repos.append(repo)
    return repos


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def sent_text(request: Any) -> str:
    return request.body.decode("utf-8", errors="replace")


def is_own(request: Any) -> bool:
    """memlane's own call (a prompt of its own), not a client's forwarded request."""
    from memlane.engine.memory.extract import FACT_PROMPT
    from memlane.engine.memory.reconcile import RECONCILE_PROMPT
    from memlane.engine.memory.summary import SUMMARY_PROMPT
    from memlane.engine.sessions.indexing import INDEX_PROMPT

    text = sent_text(request)
    return any(
        json.dumps(p)[1:60] in text
        for p in (FACT_PROMPT, RECONCILE_PROMPT, SUMMARY_PROMPT, INDEX_PROMPT)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer questions: under a minute")
    parser.add_argument("--set", action="append", default=[], metavar="MEMLANE_NAME=value")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.set)
    facts = planted()
    project_asks = 3 if args.quick else 6
    user_asks = 4 if args.quick else 8
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="memlane-cross-") as tmp,
        upstreams(facts) as (openai, claude),
    ):
        root = Path(tmp)
        repos = make_repos(root)
        with (
            memlane(openai.url, claude.base, root / "home", extra) as base,
            httpx.Client(timeout=60) as client,
        ):
            clients = ("codex", "claude")
            # plant: two sessions per project (3 project facts + 1 user fact each), two plain
            users = [f for f in facts if f.about == "user"]
            for p in range(4):
                own = [f for f in facts if f.project == p]
                for s in range(2):
                    session = Session(clients[(p + s) % 2], p)
                    for fact in [*own[s * 3 : s * 3 + 3], users[p * 2 + s]]:
                        say(client, base, session, f"Please remember this: {fact.text}.", repos)
            for s in range(2):
                session = Session("plain", None)
                for fact in users[8 + s * 4 : 12 + s * 4]:
                    say(client, base, session, f"Please remember this: {fact.text}.", repos)
            wait_for_background(base + "/v1", root / "home")
            planted_at = time.perf_counter()

            # ask: new sessions, one question per fact, never naming its token
            asks: list[tuple[Fact, int | None, str]] = []  # (fact, asking project, marker)
            recall_ms: list[float] = []
            added_ms: list[float] = []
            n = 0

            def ask(session: Session, fact: Fact) -> None:
                nonlocal n
                n += 1
                marker = f"(question {n})"
                stages = say(client, base, session, f"{marker} {fact.question}", repos)
                asks.append((fact, session.project, marker))
                recall_ms.append(stages.get("recall", float("nan")))
                added_ms.append(sum(ms for name, ms in stages.items() if name != "upstream"))

            for p in range(4):
                own = [f for f in facts if f.project == p]
                for s in range(2):
                    session = Session(clients[(p + s + 1) % 2], p)
                    for fact in own[:project_asks]:
                        ask(session, fact)
                    for fact in users[s * 8 : s * 8 + user_asks]:
                        ask(session, fact)
            for s in range(2):
                session = Session("plain", None)
                for fact in users[s * 8 : s * 8 + user_asks]:
                    ask(session, fact)
            wait_for_background(base + "/v1", root / "home")
            forwarded = [r for r in [*openai.requests, *claude.requests] if not is_own(r)]

    print(f"settings: {', '.join(args.set) or 'defaults'}{' (--quick)' if args.quick else ''}")
    report(facts, asks, forwarded, recall_ms, added_ms)
    print(
        f"\nplanting {planted_at - started:.1f} s, whole run {time.perf_counter() - started:.1f} s"
    )


def report(
    facts: list[Fact],
    asks: list[tuple[Fact, int | None, str]],
    forwarded: list[Any],
    recall_ms: list[float],
    added_ms: list[float],
) -> None:
    texts = [sent_text(r) for r in forwarded]

    def answered(marker: str) -> str:
        # the request that carried the question last (later turns resend it)
        return next((t for t in texts if marker in t), "")

    project = [(f, answered(m)) for f, p, m in asks if f.about == "project"]
    user = [(f, p, answered(m)) for f, p, m in asks if f.about == "user"]
    project_hits = sum(f.token in t for f, t in project)
    user_hits = sum(f.token in t for f, _, t in user)
    everywhere = {
        f.token
        for f in facts
        if f.about == "user"
        and all(f.token in t for g, _, t in user if g.token == f.token)
        and any(g.token == f.token for g, _, _ in user)
    }
    asked_users = {f.token for f, _, _ in user}
    leaks = 0
    for text in texts:
        match = re.search(r"<cwd>([^<]+)</cwd>|Working directory: ([^\\\"]+)", text)
        here = (match.group(1) or match.group(2)) if match else None
        for fact in facts:
            if fact.about != "project" or fact.token not in text:
                continue
            home = f"/{('atlas', 'beacon', 'cinder', 'delta')[fact.project or 0]}"
            if here is None or not here.endswith(home):
                leaks += 1
    rec = [v for v in recall_ms if v == v]
    lines = [
        "cross-session memory through the proxy",
        f"  project facts recalled in a later session of their project  "
        f"{project_hits}/{len(project)} = {share(project_hits, len(project))}  (aim >= 95%)",
        f"  user facts recalled in every project's sessions (and none)  "
        f"{user_hits}/{len(user)} = {share(user_hits, len(user))}  (aim >= 95%); "
        f"{len(everywhere)}/{len(asked_users)} facts recalled wherever asked",
        f"  project facts in another project's forwarded requests       {leaks}  (aim 0)",
        f"  recall stage (ms, Server-Timing)     p50 {percentile(rec, 0.5):.2f}  "
        f"p95 {percentile(rec, 0.95):.2f}  (n={len(rec)}; the search runs ahead, during shape)",
        f"  every memlane stage (ms, no upstream) p50 {percentile(added_ms, 0.5):.2f}  "
        f"p95 {percentile(added_ms, 0.95):.2f}  (n={len(added_ms)})",
    ]
    missed = [
        (f, f"project {p}" if p is not None else "no project")
        for f, p, t in user
        if f.token not in t
    ]
    missed += [(f, "its project") for f, t in project if f.token not in t]
    lines += [f"    missed: {f.text!r} asked in {where}" for f, where in missed[:8]]
    lines += [f"    … and {len(missed) - 8} more" for _ in range(1) if len(missed) > 8]
    print("\n".join(lines))


def share(hits: int, total: int) -> str:
    return f"{100 * hits / total:.0f}%" if total else "n/a"


if __name__ == "__main__":
    main()
