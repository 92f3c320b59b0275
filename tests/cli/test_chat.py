"""`memlane chat` in a real terminal (a pty), against the scripted upstream on loopback."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest

from memlane.store.sqlite import SQLiteStore
from tests.support.upstream import Fail, RecordedRequest, Reply, ScriptedUpstream

MEMLANE = Path(sys.executable).parent / "memlane"


def chat_requests(upstream: ScriptedUpstream) -> list[RecordedRequest]:
    """The conversation's own requests (streamed), not memlane's background LLM calls."""
    return [r for r in upstream.model_requests if r.json.get("stream") is True]


@pytest.fixture
def env(tmp_path: Path, upstream: ScriptedUpstream) -> dict[str, str]:
    # memlane's own background calls (fact extraction) are not streamed: answer them plainly
    upstream.respond_with(lambda r: None if r.json.get("stream") else Reply(text="[]"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "OPENAI_"))}
    return {
        **base,
        "MEMLANE_HOME": str(tmp_path / "home"),
        "MEMLANE_UPSTREAM_URL": upstream.url,
        "MEMLANE_LLM_MODEL": "scripted-small",
        "MEMLANE_EMBEDDING_BACKEND": "hashing",
        "TERM": "dumb",
    }


def spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        str(MEMLANE),
        ["chat", *args],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
        preexec_fn=default_ctrl_c,
    )


def default_ctrl_c() -> None:
    """A suite started in the background by a shell (`scripts/test &`) ignores SIGINT, and
    a child inherits that: Ctrl-C must reach the chat as it does in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def say(child: pexpect.spawn, text: str, expected: str) -> None:
    child.expect_exact("you> ")
    child.sendline(text)
    child.expect_exact(expected)


def leave(child: pexpect.spawn) -> None:
    """`/exit` at the next prompt; the chat ends cleanly."""
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_two_turns_then_resume_sees_them(
    env: dict[str, str], upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    child = spawn(env)
    child.expect_exact("new chat with scripted-small")
    say(child, "my name is Ada", "assistant> echo: my name is Ada")
    say(child, "I like tea", "assistant> echo: I like tea")
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(r"saved as ([0-9a-f]{32})")
    session_id = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    first_run = chat_requests(upstream)
    assert len(first_run) == 2
    second = [m["content"] for m in first_run[1].messages if m["role"] in ("user", "assistant")]
    assert second[-3:] == ["my name is Ada", "echo: my name is Ada", "I like tea"]

    child = spawn(env, "--resume")
    child.expect_exact(f"resuming {session_id}")
    child.expect_exact("  you: my name is Ada")
    child.expect_exact("  assistant: echo: I like tea")
    say(child, "what is my name?", "assistant> echo: what is my name?")
    leave(child)

    resumed = [
        m["content"]
        for m in chat_requests(upstream)[-1].messages
        if m["role"] in ("user", "assistant")
    ]
    assert resumed[-5:] == [
        "my name is Ada",
        "echo: my name is Ada",
        "I like tea",
        "echo: I like tea",
        "what is my name?",
    ]
    store = SQLiteStore(tmp_path / "home" / "memlane.db")
    try:
        texts = [m.message.text for m in store.list_messages(session_id, transcript_only=True)]
        sessions = store.list_sessions()
    finally:
        store.close()
    assert texts == [*resumed[-5:], "echo: what is my name?"]
    assert len(sessions) == 1


def test_commands_and_ephemeral_chat(
    env: dict[str, str], upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    child = spawn(env, "--ephemeral")
    child.expect_exact("ephemeral: nothing is saved")
    say(child, "secret plans", "assistant> echo: secret plans")
    child.expect_exact("you> ")
    child.sendline("/help")
    child.expect_exact("commands: /sessions")
    assert "unknown command" not in (child.before or "")  # /help is a command of its own
    child.expect_exact("you> ")
    child.sendline("/nope")
    child.expect_exact("unknown command /nope")
    leave(child)
    assert "saved as" not in (child.before or "")
    store = SQLiteStore(tmp_path / "home" / "memlane.db")
    try:
        assert store.list_sessions() == []
    finally:
        store.close()

    child = spawn(env)
    say(child, "first", "assistant> echo: first")
    child.expect_exact("you> ")
    child.sendline("/todo - [ ] write tests")
    child.expect_exact("- [ ] write tests")
    child.expect_exact("you> ")
    child.sendline("/sessions")
    child.expect(re.compile(r"[0-9a-f]{12}\s+2 msgs\s+first"))
    child.expect_exact("you> ")
    child.sendline("/compact")
    child.expect_exact("nothing to compact in")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_resume_without_sessions_and_unknown_ids_fail_clearly(env: dict[str, str]) -> None:
    child = spawn(env, "--resume")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert "no session to resume yet" in (child.before or "")
    child = spawn(env, "--resume", "nope")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert "no session matches 'nope'" in (child.before or "")


def test_fork_continues_a_copy_and_bad_references_are_answered(
    env: dict[str, str], upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    child = spawn(env)
    say(child, "the plan is A", "assistant> echo: the plan is A")
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(r"saved as ([0-9a-f]{32})")
    source = child.match.group(1)
    child.expect(pexpect.EOF)

    child = spawn(env, "--fork", source)
    child.expect_exact("  you: the plan is A")
    say(child, "what about @@no-such-session?", "memlane could not resolve @@no-such-session")
    say(child, "then plan B", "assistant> echo: then plan B")
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(r"saved as ([0-9a-f]{32})")
    forked = child.match.group(1)
    child.expect(pexpect.EOF)
    assert forked != source

    store = SQLiteStore(tmp_path / "home" / "memlane.db")
    try:
        session = store.get_session(forked)
        texts = [m.message.text for m in store.list_messages(forked, transcript_only=True)]
        original = [m.message.text for m in store.list_messages(source, transcript_only=True)]
    finally:
        store.close()
    assert session is not None
    assert session.parent_id == source
    assert texts[:2] == ["the plan is A", "echo: the plan is A"]
    assert texts[-2:] == ["then plan B", "echo: then plan B"]
    assert original == ["the plan is A", "echo: the plan is A"]
    # the unresolvable reference was answered by memlane, never forwarded
    assert [
        contents[-1]["content"] for contents in (r.messages for r in chat_requests(upstream))
    ] == [
        "the plan is A",
        "then plan B",
    ]


def test_ctrl_c_at_the_prompt_leaves_at_once_with_the_hint_and_the_unsent_line(
    env: dict[str, str],
) -> None:
    child = spawn(env)
    say(child, "remember my plan", "assistant> echo: remember my plan")
    child.expect_exact("you> ")
    child.send("half a thought")
    child.expect_exact("half a thought")  # echoed: the line editor holds it now
    child.sendintr()
    child.expect_exact("not sent: half a thought")
    child.expect(r"saved as [0-9a-f]{32}: memlane chat --resume")
    child.expect(pexpect.EOF, timeout=10)
    child.close()
    assert child.exitstatus == 0


def blocked_signals(pid: int) -> dict[str, int]:
    """Each thread's name and blocked-signal mask, read from /proc."""
    masks: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines())
        masks[f"{task.name} {fields['Name']}"] = int(fields["SigBlk"], 16)
    return masks


def test_only_the_main_thread_takes_ctrl_c(env: dict[str, str]) -> None:
    """A SIGINT the kernel hands to another thread (memlane's, or one a native library
    started, such as numpy's BLAS pool) would leave `input()` waiting until Enter."""
    child = spawn(env)
    child.sendline("remember my plan")
    child.expect_exact("assistant> echo: remember my plan")
    child.expect_exact("you> ")
    masks = blocked_signals(child.pid)
    sigint = 1 << (signal.SIGINT - 1)
    main = f"{child.pid} "
    others = {name: mask for name, mask in masks.items() if not name.startswith(main)}
    assert others, "a turn runs work on threads besides the main one"
    assert all(mask & sigint for mask in others.values()), others
    assert not next(mask for name, mask in masks.items() if name.startswith(main)) & sigint
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()


def test_with_the_running_summary_on_chat_sends_the_working_context(
    env: dict[str, str], upstream: ScriptedUpstream
) -> None:
    from memlane.engine.sessions.working import SUMMARY_PROMPT

    def answer(request: RecordedRequest) -> Reply | None:
        if request.json.get("stream"):
            return None
        if request.messages and request.messages[0].get("content") == SUMMARY_PROMPT:
            return Reply(text="The user is planning a trip to Oslo.")
        return Reply(text="[]")

    upstream.respond_with(answer)
    env = {
        **env,
        "MEMLANE_SUMMARY_ENABLED": "true",
        "MEMLANE_SUMMARY_THRESHOLD": "2",
        "MEMLANE_SUMMARY_KEEP_LAST": "2",
    }
    child = spawn(env)
    say(child, "I plan a trip to Oslo", "assistant> echo: I plan a trip to Oslo")
    child.expect_exact("you> ")
    child.sendline("/summary")
    child.expect_exact("no summary yet")
    say(child, "in March", "assistant> echo: in March")
    say(child, "by train", "assistant> echo: by train")
    child.expect_exact("you> ")
    child.sendline("/summary")
    child.expect(r"summary of the first (\d+) messages:")
    covered = int(child.match.group(1))
    child.expect_exact("trip to Oslo")
    say(child, "what else?", "assistant> echo: what else?")  # summarised in the background
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    last = chat_requests(upstream)[-1].messages
    assert last[0]["role"] == "system"
    assert "The user is planning a trip to Oslo." in last[0]["content"]
    transcript = ["I plan a trip to Oslo", "echo: I plan a trip to Oslo", "in March"]
    transcript += ["echo: in March", "by train", "echo: by train", "what else?"]
    sent = [m["content"] for m in last[1:] if not m["content"].startswith("<memlane-memory>")]
    assert sent == transcript[covered:]


def test_an_upstream_error_is_one_line_and_the_chat_goes_on(
    env: dict[str, str], upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    streamed = iter([Fail(503, "overloaded, try later"), None])
    upstream.respond_with(lambda r: next(streamed) if r.json.get("stream") else Reply(text="[]"))
    child = spawn(env)
    say(child, "first try", "error: LLM answered HTTP 503: overloaded, try later")
    say(child, "second try", "assistant> echo: second try")
    child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(r"saved as ([0-9a-f]{32})")
    session_id = child.match.group(1)
    child.expect(pexpect.EOF)
    store = SQLiteStore(tmp_path / "home" / "memlane.db")
    try:
        stored = [(m.message.text, m.status) for m in store.list_messages(session_id)]
    finally:
        store.close()
    assert stored == [
        ("first try", "failed"),
        ("second try", "ok"),
        ("echo: second try", "ok"),
    ]
    # the failed prompt is not resent as history
    assert [m["content"] for m in chat_requests(upstream)[-1].messages] == ["second try"]


def test_a_chat_in_a_repository_files_its_memories_under_the_repositorys_namespace(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The namespace the proxy gives an agent working there and `memlane mcp` uses there (the
    repository root's path): what the user tells a chat in the repository is found by the
    agents working in it."""
    inside = tmp_path / "shop" / "src" / "api"
    inside.mkdir(parents=True)
    (tmp_path / "shop" / ".git").mkdir()
    child = pexpect.spawn(
        str(MEMLANE), ["chat"], env=env, cwd=str(inside), encoding="utf-8", timeout=60
    )
    say(child, "the API is versioned", "assistant> echo: the API is versioned")
    leave(child)
    store = SQLiteStore(tmp_path / "home" / "memlane.db")
    try:
        namespaces = [s.namespace for s in store.list_sessions()]
    finally:
        store.close()
    assert namespaces == [str((tmp_path / "shop").resolve())]
