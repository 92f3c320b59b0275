"""The real Claude Code CLI, unmodified, through memlane: a Bash tool loop, then `--continue`.

`claude` (installed by `scripts/test-clients` into `.cache/claude/`) runs with the
Claude Code guide's set-up (docs/guides/claude-code.md): `ANTHROPIC_BASE_URL` at a
memlane proxy on loopback,
its non-essential traffic, telemetry and updater off, a temporary `HOME`, memlane's
headers in `ANTHROPIC_CUSTOM_HEADERS`. The scripted Anthropic upstream first answers
with a thinking block and a Bash `tool_use`; Claude Code runs `echo memlane-ok`,
sends the output back, and prints the upstream's final text; `claude -p … --continue`
adds a turn to the same conversation from Claude Code's own transcript. Checked: what
went upstream (Claude Code's own fields and headers untouched, memlane's headers gone,
the thinking block resent byte for byte, the state block, a stable prefix) and what
was stored (one session under Claude Code's session id, each prompt once, in order;
the key nowhere under memlane's home). An HTTP(S) proxy trap records any attempt to
reach beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.proxy.wire.base import dumps
from memlane.text.llm import OWN_CALL_HEADER
from tests.proxy.conftest import stored
from tests.proxy.test_codex_cli import NetworkTrap, trap  # noqa: F401 (the fixture)
from tests.support.anthropic_upstream import AnthropicProxy, ScriptedAnthropic, Turn, signature
from tests.support.upstream import (
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    ToolCallSpec,
)

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / ".cache" / "claude" / "node_modules" / ".bin" / "claude"
GUIDE = ROOT / "docs" / "guides" / "claude-code.md"
README_BASE_URL = "http://127.0.0.1:8100"

MODEL = "claude-sonnet-4-6"
PROMPT = "Run echo memlane-ok with the Bash tool and tell me what it printed."
THOUGHT = "The user wants the command run; use Bash."
FINAL = "The command printed memlane-ok."
TODO = "1. run the command\\n2. report what it printed"
REPO = "memlane-claude-test"
API_KEY = "sk-ant-api03-claude-secret-0123456789"
CLAUDE_TIMEOUT = 90.0


def readme_environment() -> dict[str, str]:
    """The variables of the Claude Code guide's first block, verbatim."""
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert match is not None, "docs/guides/claude-code.md has no ```sh block"
    found = dict(re.findall(r"(?:export )?([A-Z_]+)=(\S+)", match.group(1)))
    assert found, "docs/guides/claude-code.md: the block sets no variable"
    return found


def claude_binary() -> Path:
    if not CLAUDE.exists():
        pytest.fail(
            f"Claude Code is not installed at {CLAUDE.relative_to(ROOT)}: run scripts/test-clients "
            "with npm on PATH (it installs the pinned @anthropic-ai/claude-code there)"
        )
    return CLAUDE


class ClaudeCode:
    """`claude -p` in a temporary home, configured as the guide says."""

    def __init__(self, proxy: RunningProxy, network: NetworkTrap, tmp_path: Path) -> None:
        self.binary = claude_binary()
        home, self.work = tmp_path / "home", tmp_path / "work"
        home.mkdir()
        self.work.mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "ANTHROPIC_API_KEY": API_KEY,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        for name, value in readme_environment().items():
            self.env[name] = value.replace(README_BASE_URL, proxy.base)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            self.env[name] = self.env[name.lower()] = network.url

    def run(self, *args: str, todo: str) -> subprocess.CompletedProcess[str]:
        headers = f"X-Memlane-Todo: {todo}\nX-Memlane-Repo: {REPO}"
        command = [str(self.binary), "-p", *args, "--model", MODEL, "--allowedTools", "Bash"]
        try:
            result = subprocess.run(
                command,
                env={**self.env, "ANTHROPIC_CUSTOM_HEADERS": headers},
                cwd=self.work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CLAUDE_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"claude -p did not finish within {CLAUDE_TIMEOUT:g} s: {exc.stderr!r}")
        assert result.returncode == 0, (
            f"claude -p failed:\n{result.stdout}\n{result.stderr[-3000:]}"
        )
        return result


def texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if b.get("type") == "text"]


def extends(earlier: RecordedRequest, later: RecordedRequest) -> bool:
    """The later request's messages start with the earlier one's, byte for byte as sent
    (but for the breakpoint Claude Code moves to the newest turn each time)."""

    def bare(request: RecordedRequest) -> list[Any]:
        out = json.loads(json.dumps(request.json["messages"]))
        for message in out:
            for block in message["content"] if isinstance(message["content"], list) else []:
                block.pop("cache_control", None)
        return out

    before, after = bare(earlier), bare(later)
    assert dumps(earlier.json["messages"]) in earlier.body
    return after[: len(before)] == before


def test_claude_code_runs_its_bash_loop_and_continues_through_memlane(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    trap: NetworkTrap,  # noqa: F811
    tmp_path: Path,
) -> None:
    proxy = anthropic_proxy()
    claude = ClaudeCode(proxy, trap, tmp_path)
    call = ToolCallSpec("Bash", json.dumps({"command": "echo memlane-ok", "description": "Say ok"}))
    anthropic_upstream.script(
        Turn(reasoning=THOUGHT, tool_calls=[ToolCallSpec(call.name, call.arguments, "toolu_cc_1")]),
        Turn(text=FINAL, cache_read=1200),
        Turn(text="You are welcome."),
    )

    assert claude.run(PROMPT, todo=TODO).stdout.strip() == FINAL
    assert claude.run("thanks", "--continue", todo="done").stdout.strip() == "You are welcome."
    proxy.drain()
    assert trap.attempts == []  # Claude Code reached nothing but 127.0.0.1
    requests = anthropic_upstream.message_requests
    assert len(requests) == 3
    first, second, third = requests

    # Claude Code's requests as the upstream got them: its fields and headers, memlane's gone
    session_id = first.headers["x-claude-code-session-id"]
    for request in requests:
        body, headers = request.json, request.headers
        assert body["stream"] is True
        assert body["model"] == MODEL
        assert "Bash" in [t["name"] for t in body["tools"]]
        assert body["system"][0]["text"].startswith("x-anthropic-billing-header:")
        assert json.loads(body["metadata"]["user_id"])["session_id"] == session_id
        assert headers["x-claude-code-session-id"] == session_id
        assert headers["x-api-key"] == API_KEY
        assert headers["anthropic-version"] == "2023-06-01"
        assert "claude-code" in headers["anthropic-beta"]
        assert not [name for name in headers if name.startswith("x-memlane-")]
    assert anthropic_upstream.queries == ["beta=true"] * 3

    # the tool loop: the thinking block and the call come back, then the command's output
    assistant, results = second.json["messages"][-2:]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0]["signature"] == signature(THOUGHT)
    assert assistant["content"][0]["thinking"] == THOUGHT
    assert assistant["content"][1]["id"] == "toolu_cc_1"
    result = results["content"][0]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_cc_1"
    assert "memlane-ok" in json.dumps(result["content"])
    # and the thinking block is sent again on the continued turn, unchanged
    continued = next(m for m in third.json["messages"] if m["role"] == "assistant")
    assert continued["content"][0] == assistant["content"][0]

    # the state block: after the prompt in the first user turn, kept there later; the new
    # TODO of the continued turn comes after "thanks"
    opening = first.json["messages"][0]
    assert texts(opening)[-2] == PROMPT
    block = texts(opening)[-1]
    assert "<todo>\n1. run the command\n2. report what it printed\n</todo>" in block
    assert texts(second.json["messages"][0])[-1] == block
    assert texts(third.json["messages"][-1])[-2:] == [
        "thanks",
        "<memlane_state>\n<todo>\ndone\n</todo>\n</memlane_state>",
    ]
    assert extends(first, second)
    assert extends(second, third)

    # one session under Claude Code's id, in the repo's namespace, each prompt stored once
    assert [s.key for s in proxy.store.list_sessions()] == [session_id]
    session = proxy.store.find_session(session_id)
    assert session.namespace == REPO
    rows = stored(proxy, session_id)
    users = [r[3] for r in rows if r[:3] == ("user", "message", "client")]
    assert users == [PROMPT, "thanks"]
    flow = [r[:3] for r in rows if r[0] != "system"]
    assert flow == [
        ("user", "message", "client"),
        ("assistant", "reasoning", "client"),
        ("assistant", "tool_call", "client"),
        ("tool", "tool_result", "client"),
        ("assistant", "message", "client"),
        ("user", "message", "client"),
        ("assistant", "message", "client"),
    ]
    assert [r[3] for r in rows if r[2] == "state"] == [block, texts(third.json["messages"][-1])[-1]]
    assert all(r[4] == "ok" for r in stored(proxy, session_id, include_superseded=True))

    # the key Claude Code sent went upstream (above) and is nowhere in memlane's home
    home = Path(proxy.settings.home_path)
    leaked = [p for p in home.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    assert leaked == []


FACT = "We deploy the shop to blue-kestrel-7"


def project_facts(request: RecordedRequest) -> Reply | None:
    """memlane's own calls (marked `OWN_CALL_HEADER`; for a Claude Code turn they go where
    the turn went, Messages calls to the Anthropic upstream): its fact extraction answered
    with the fact the user said, the rest with nothing. None for Claude Code's own
    requests, which the script answers in order."""
    if OWN_CALL_HEADER.lower() not in request.headers:
        return None
    if request.json.get("system") != FACT_PROMPT:
        return Reply(text="[]")
    messages = request.json.get("messages") or []
    said = "blue-kestrel-7" in str(messages[-1].get("content")) if messages else False
    return Reply(text=json.dumps([FACT] if said else []))


def claude_in(claude: ClaudeCode, folder: Path, prompt: str) -> str:
    """A new `claude -p` conversation started in `folder`, with no memlane header at all."""
    command = [str(claude.binary), "-p", prompt, "--model", MODEL]
    result = subprocess.run(
        command,
        env=claude.env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLAUDE_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"claude -p failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout.strip()


def test_a_new_claude_code_conversation_in_the_same_repository_recalls_an_earlier_fact(
    anthropic_proxy: AnthropicProxy,
    anthropic_upstream: ScriptedAnthropic,
    upstream: ScriptedUpstream,
    trap: NetworkTrap,  # noqa: F811
    tmp_path: Path,
) -> None:
    """No header, no set-up: Claude Code's working directory names the project (its git
    root), so a fact said in one conversation reaches a new one started in a subfolder of
    the same repository, and not one started in another repository."""
    proxy = anthropic_proxy(memory_enabled=True)
    claude = ClaudeCode(proxy, trap, tmp_path)
    shop, garden = tmp_path / "code" / "shop", tmp_path / "code" / "garden"
    for repo in (shop, garden):
        (repo / ".git").mkdir(parents=True)
    (shop / "src").mkdir()
    anthropic_upstream.respond_with(project_facts)
    anthropic_upstream.script(
        Turn(text="Noted."), Turn(text="To blue-kestrel-7."), Turn(text="No idea.")
    )

    assert claude_in(claude, shop, f"Remember: {FACT}.") == "Noted."
    proxy.drain()
    facts = proxy.store.list_facts(scope=f"ns:{shop.resolve()}", roles=("memory",))
    assert [f.text for f in facts] == [FACT]
    question = "Where do we deploy the shop?"
    assert claude_in(claude, shop / "src", question) == "To blue-kestrel-7."
    assert claude_in(claude, garden, question) == "No idea."
    proxy.drain()
    assert trap.attempts == []

    asked = [
        r
        for r in anthropic_upstream.message_requests
        if question in json.dumps(r.json) and OWN_CALL_HEADER not in r.headers
    ]
    same_project, other_project = asked
    assert "blue-kestrel-7" in json.dumps(same_project.json["messages"])
    assert "blue-kestrel-7" not in json.dumps(other_project.json["messages"])
    by_key = {s.key: s.namespace for s in proxy.store.list_sessions()}
    assert by_key[same_project.headers["x-claude-code-session-id"]] == str(shop.resolve())
    assert by_key[other_project.headers["x-claude-code-session-id"]] == str(garden.resolve())
