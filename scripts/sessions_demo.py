"""Run the "A session's life" walk-through of docs/concepts/sessions.md for real, as Markdown.

A scripted OpenAI-compatible upstream (the one the tests use) answers on
loopback; `memlane serve` runs against it in a temporary home; every command
shown is executed with bash and its real output is captured. Regenerate the
walk-through (docs/concepts/sessions.md) with:

    .venv/bin/python scripts/sessions_demo.py > /tmp/sessions.md
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.upstream import RecordedRequest, Reply, ScriptedUpstream  # noqa: E402

INDEX = {
    "name": "job-queue-design",
    "description": "Designing a Postgres-backed job queue with retries.",
    "summary": "The queue lives in Postgres: workers claim jobs with SELECT … FOR UPDATE "
    "SKIP LOCKED, failed jobs retry with exponential backoff (30 s base, 5 attempts), "
    "then move to a dead-letter table.",
    "tags": ["postgres", "queue", "retries"],
}
ANSWERS = {
    "claim": "Use SELECT … FOR UPDATE SKIP LOCKED so workers never block each other.",
    "retry": "Exponential backoff: 30 s base, doubled each time, 5 attempts.",
    "after": "Move the job to a dead_letter table with its last error.",
    "index": "A partial index on (run_at) WHERE state = 'ready'.",
    "monitor": "Alert when the oldest ready job is more than 5 minutes old.",
}


def upstream_answer(request: RecordedRequest) -> Reply | None:
    first = str(request.messages[0].get("content", "")) if request.messages else ""
    if first.startswith("You index conversations"):
        return Reply(text=json.dumps(INDEX), usage=(812, 96))
    if first.startswith("You answer questions about a past"):
        return Reply(text="5 attempts, with a 30 s base delay doubled each time.", usage=(640, 14))
    if first.startswith("You extract durable facts"):
        return Reply(text="[]")
    last = str(request.messages[-1].get("content", "")) if request.messages else ""
    if any("@@job-queue-design" in str(m.get("content", "")) for m in request.messages):
        return Reply(text="Same as the job queue: SKIP LOCKED to claim, backoff on failure.")
    for word, answer in ANSWERS.items():
        if word in last:
            return Reply(text=answer, usage=(120, 20))
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(command: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
        cwd=env["MEMLANE_HOME"],
    )
    return done.stdout.rstrip().replace(env["MEMLANE_HOME"], "~/.local/share/memlane")


def chat_transcript(env: dict[str, str]) -> str:
    """Two real `memlane chat` runs under a pty: one turn, then a resume."""
    import pexpect

    shown: list[str] = []
    for args, prompt in (
        (["--model", "gpt-4o-mini"], "How should workers claim jobs from a Postgres queue?"),
        (["--resume", "--model", "gpt-4o-mini"], "And how should a failed job retry?"),
    ):
        child = pexpect.spawn(
            "memlane", ["chat", *args], env=env, encoding="utf-8", timeout=60, cwd=env["HOME"]
        )
        child.expect_exact("you> ")
        lines = [f"$ memlane chat {' '.join(args)}", *_lines(child.before), f"you> {prompt}"]
        child.sendline(prompt)
        child.expect_exact("you> ")
        lines += _lines(child.before)[1:]
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        lines += ["you> /exit", *_lines(child.before)[1:]]
        shown.append("\n".join(lines))
    text = "\n".join(shown).replace(env["MEMLANE_HOME"], "~/.local/share/memlane")
    return f"```console\n{text}\n```\n"


def _lines(text: str | None) -> list[str]:
    return [line.rstrip() for line in (text or "").replace("\r", "").split("\n") if line.strip()]


def main() -> None:
    upstream = ScriptedUpstream()
    upstream.start()
    upstream.respond_with(upstream_answer)
    home = Path(tempfile.mkdtemp(prefix="memlane-demo-"))
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))},
        "MEMLANE_HOME": str(home),
        "MEMLANE_UPSTREAM_URL": upstream.url,
        "MEMLANE_INDEX_PRICE_INPUT": "0.15",
        "MEMLANE_INDEX_PRICE_OUTPUT": "0.60",
        "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        "COLUMNS": "110",
        "NO_COLOR": "1",
    }
    server = subprocess.Popen(
        ["memlane", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    out: list[str] = []

    def step(text: str, command: str, shown: str | None = None) -> None:
        result = run(command, env)
        out.append(text)
        out.append(f"```console\n$ {shown or command}\n{result}\n```\n")

    try:
        for _ in range(100):
            if run(f"curl -s {base.removesuffix('/v1')}/health", env).startswith("{"):
                break
            time.sleep(0.1)
        ask = (
            "curl -s {base}/chat/completions -H 'X-Memlane-Session: {key}' "
            "-H 'X-Memlane-Repo: shop' -H 'content-type: application/json' "
            '-d \'{{"model": "gpt-4o-mini", "messages": {messages}}}\' '
            "| jq -r '.choices[0].message.content'"
        )
        history: list[dict[str, str]] = []
        prompts = [
            "How should workers claim jobs from a Postgres queue?",
            "And how should a failed job retry?",
            "What happens after the last attempt?",
            "Which index does the claim query need?",
            "How do we monitor the queue?",
        ]
        for number, prompt in enumerate(prompts):
            history.append({"role": "user", "content": prompt})
            command = ask.format(base=base, key="queue-work", messages=json.dumps(history))
            if number == 0:
                shown = command.replace(base, "http://127.0.0.1:8100/v1")
                step(
                    "A client talks to the proxy; the session is created on its first user "
                    "message (the key comes from `X-Memlane-Session`, or the client's own "
                    "session headers):\n",
                    command,
                    shown,
                )
            else:
                run(command, env)
            answer = next(a for w, a in ANSWERS.items() if w in prompt)
            history.append({"role": "assistant", "content": answer})
        time.sleep(1.0)  # the index is written in the background after the fifth prompt
        step(
            "After four more turns (five user messages), the session is indexed in the "
            "background: a cheap model names, describes, summarises and tags it. `list` "
            "shows title, messages, age, tokens and cost, newest first:\n",
            "memlane sessions list",
        )
        step(
            "`show` accepts an id, an id prefix, the key or the name; `--json` is there for "
            "scripts. The same metadata is in `meta.json` in the session's folder:\n",
            "memlane sessions show job-queue-design | head -11",
        )
        reference = [{"role": "user", "content": "Design the email outbox like @@job-queue-design"}]
        command = ask.format(base=base, key="outbox", messages=json.dumps(reference))
        step(
            "Another session of the same namespace references it with `@@name`: the summary is "
            "injected as its own message just before the user's, and stored there, so later "
            "turns resend the same prefix (provider caches keep hitting):\n",
            command,
            command.replace(base, "http://127.0.0.1:8100/v1"),
        )
        step(
            "",
            "memlane sessions show outbox --all --json | jq -r '.messages[] | \"\\(.position) "
            "\\(.origin) \\(.role): \\(.text[:72])\"'",
        )
        wrong = [{"role": "user", "content": "Is this like @@jobs?"}]
        command = ask.format(base=base, key="typo", messages=json.dumps(wrong))
        step(
            "A name that matches nothing (or several sessions) is answered by memlane itself, "
            "as the assistant, instead of being forwarded:\n",
            command,
            command.replace(base, "http://127.0.0.1:8100/v1"),
        )
        step(
            "`@@name: question` (or `memlane sessions ask`) asks a cheap model about the past "
            "session, over its stored summaries and its most recent messages:\n",
            "memlane sessions ask job-queue-design 'How many retry attempts did we settle on?'",
        )
        step(
            "Fork, export, import and delete:\n",
            "memlane sessions fork job-queue-design --key queue-v2 && "
            "memlane sessions export queue-work -o queue.jsonl && "
            "memlane sessions delete queue-v2 --yes && "
            "memlane sessions import queue.jsonl --key queue-copy",
        )
        out.append(
            "In the terminal, `memlane chat` goes through the same engine in-process (memory, "
            "governance, scaffold, `@@`), streams the answer and saves every turn; "
            "`--resume` with no id continues the most recent session:\n"
        )
        out.append(chat_transcript(env))
    finally:
        server.terminate()
        server.wait(timeout=10)
        upstream.stop()
    print("\n".join(out))


if __name__ == "__main__":
    main()
