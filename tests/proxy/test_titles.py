"""A Codex-shaped session is titled with what the user asked, not its context items
(Claude Code's reminders are `system` items already: `test_asked.py` covers a reminder
in the user's own text)."""

from __future__ import annotations

import httpx

from tests.proxy.conftest import QUIET, ask
from tests.proxy.test_workdir import AGENTS, codex_body
from tests.support.upstream import ProxyFactory, Reply, ScriptedUpstream


def test_a_codex_session_is_titled_with_the_prompt(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**QUIET)
    upstream.script(Reply(text="To blue-kestrel-7."))
    body = codex_body()
    body["input"][2]["content"].insert(0, {"type": "input_text", "text": AGENTS})
    body["prompt_cache_key"] = "codex-thread-1"
    headers = {"session-id": "codex-thread-1", "originator": "codex_exec"}
    sent = httpx.post(f"{proxy.url}/responses", json=body, headers=headers, timeout=30)
    assert sent.status_code == 200, sent.text
    proxy.drain()
    session = proxy.store.find_session("codex-thread-1")
    assert session is not None
    assert session.title == "Where do we deploy?"


def test_a_first_prompt_s_key_stays_out_of_the_title(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    """The transcript keeps the prompt verbatim; the session's title does not."""
    proxy = proxy_factory(**QUIET)
    upstream.script(Reply(text="ok"))
    key = "sk-proj-" + "a1B2c3D4" * 4
    said = f"my key is {key} and my password is correct-horse-battery-staple-77"
    ask(proxy, "titled", [{"role": "user", "content": said}], stream=False)
    proxy.drain()
    session = proxy.store.find_session("titled")
    assert session is not None
    assert session.title == "my key is [redacted openai-key] and my password is [redacted secret]"
    transcript = [m.message.text for m in proxy.store.list_messages(session.id)]
    assert said in transcript
