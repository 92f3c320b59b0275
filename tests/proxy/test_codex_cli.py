"""The real Codex CLI, unmodified, through memlane: one agentic loop end to end.

`codex exec` (installed by `scripts/test-clients` into `.cache/codex/`) is pointed at
a memlane proxy on loopback with the provider block the Codex CLI guide
(docs/guides/codex.md) gives users; the proxy forwards to the scripted upstream. The upstream
first answers with a reasoning item and an `exec_command` function call, Codex
runs `echo memlane-ok`, sends the output back, and the upstream's final text is
what Codex prints; then `codex exec resume --last` adds a second turn from Codex's
own rollout file. Run twice: with Codex's default model (tools sent as an
`additional_tools` input item) and with a model it has no metadata for (a
top-level `tools` list). Checked: what went upstream (Codex's own fields and headers
untouched, memlane's headers gone, the state block, a byte-identical prefix),
and what was stored (once per message, in order, under Codex's own session id).

Codex gets a temporary home and a working folder, no stdin, and an HTTP(S) proxy
environment pointing at a local trap that records any attempt to reach beyond
127.0.0.1 (its plugin sync, analytics and update check are switched off, and the
test asserts the trap stayed empty).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane.engine.memory.extract import FACT_PROMPT
from memlane.proxy.wire.base import dumps
from tests.proxy.conftest import QUIET, stored
from tests.support.upstream import (
    ProxyFactory,
    RecordedRequest,
    Reply,
    RunningProxy,
    ScriptedUpstream,
    ToolCallSpec,
)

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / ".cache" / "codex" / "node_modules" / ".bin" / "codex"
GUIDE = ROOT / "docs" / "guides" / "codex.md"
README_BASE_URL = "http://127.0.0.1:8100/v1"

PROMPT = "Run echo memlane-ok and tell me what it printed."
FINAL = "The command printed memlane-ok."
TODO = "1. run the command\\n2. report what it printed"
REPO = "memlane-codex-test"
API_KEY = "sk-codex-secret-0123456789"
CODEX_TIMEOUT = 60.0

OFFLINE = [
    # Codex's own outbound traffic (without these it connects to github.com, api.github.com,
    # chatgpt.com and ab.chatgpt.com at start-up), as the Codex CLI guide tells offline users.
    "check_for_update_on_startup=false",
    "features.plugins=false",  # the curated plugin sync (git clone, GitHub API, catalog)
    "analytics.enabled=false",  # metrics to ab.chatgpt.com
    # A broken proxy should fail the test at once, not after Codex's retries with backoff.
    "model_providers.memlane.request_max_retries=0",
    "model_providers.memlane.stream_max_retries=0",
    "model_providers.memlane.stream_idle_timeout_ms=20000",
]


def readme_provider_block() -> str:
    """The `config.toml` snippet of the Codex CLI guide, verbatim."""
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(r"```toml\n(.*?)```", text, re.DOTALL)
    assert match is not None, "docs/guides/codex.md has no ```toml block"
    return match.group(1)


class NetworkTrap:
    """A loopback listener posing as Codex's HTTP(S) proxy: records whoever connects."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.attempts: list[str] = []
        self._thread = threading.Thread(target=self._accept, daemon=True, name="network-trap")
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(512).decode("latin-1").splitlines()
                except OSError:
                    first = []
                self.attempts.append(first[0] if first else "<connection>")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def trap() -> Iterator[NetworkTrap]:
    running = NetworkTrap()
    yield running
    running.close()


def codex_binary() -> Path:
    if not CODEX.exists():
        pytest.fail(
            f"Codex CLI is not installed at {CODEX.relative_to(ROOT)}: run scripts/test-clients "
            "with npm on PATH (it installs the pinned @openai/codex there)"
        )
    return CODEX


class Codex:
    """`codex exec` in a temporary home whose config.toml is the guide's provider block."""

    def __init__(
        self, proxy: RunningProxy, trap: NetworkTrap, tmp_path: Path, model: str | None
    ) -> None:
        self.binary = codex_binary()
        self.model = [f"--model={model}"] if model else []
        home, self.work = tmp_path / "home", tmp_path / "work"
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        self.work.mkdir()
        provider = readme_provider_block().replace(README_BASE_URL, proxy.url)
        (codex_home / "config.toml").write_text(provider, encoding="utf-8")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "OPENAI_API_KEY": API_KEY,
            "LANG": "C.UTF-8",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            self.env[name] = self.env[name.lower()] = trap.url

    def run(self, *args: str, todo: str) -> subprocess.CompletedProcess[str]:
        """One `codex exec` (no stdin); memlane's headers go in the provider's `http_headers`."""
        headers = {"X-Memlane-Todo": todo, "X-Memlane-Repo": REPO}
        table = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in headers.items())
        overrides = [*OFFLINE, f"model_providers.memlane.http_headers={{ {table} }}"]
        command = [
            str(self.binary),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",  # echo, in a throwaway folder
            "--color=never",
            *self.model,
            f"--cd={self.work}",
            *(arg for override in overrides for arg in ("-c", override)),
            *args,
        ]
        try:
            result = subprocess.run(
                command,
                env=self.env,
                cwd=self.work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CODEX_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"codex exec did not finish within {CODEX_TIMEOUT:g} s: {exc.stderr!r}")
        assert result.returncode == 0, f"codex exec failed:\n{result.stderr[-3000:]}"
        return result


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [])


def state_blocks(request: RecordedRequest) -> list[dict[str, Any]]:
    return [i for i in request.json["input"] if "<memlane_state>" in text_of(i)]


def extends(earlier: RecordedRequest, later: RecordedRequest) -> bool:
    """The later forwarded input starts with the earlier one, byte for byte as sent."""
    before, after = dumps(earlier.json["input"]), dumps(later.json["input"])
    assert before in earlier.body
    assert after in later.body
    return after.startswith(before[:-1] + b",")


def tool_names(body: dict[str, Any]) -> set[str]:
    """Tool names, top-level or in `additional_tools` input items, namespaces opened."""
    found: set[str] = set()
    tools = list(body.get("tools") or [])
    tools += [t for i in body["input"] if i.get("type") == "additional_tools" for t in i["tools"]]
    while tools:
        tool = tools.pop()
        found.add(str(tool.get("name") or tool.get("type")))
        tools += tool.get("tools") or []
    return found


@pytest.mark.parametrize(
    ("model", "tool"),
    [
        # a model Codex has no metadata for: a top-level `tools` list, exec_command among them
        ("scripted-small", "exec_command"),
        # Codex's default model: its tools in an `additional_tools` input item (code-mode exec)
        (None, "exec"),
    ],
    ids=["unknown-model", "default-model"],
)
def test_codex_exec_and_resume_run_their_tool_loop_through_memlane(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    trap: NetworkTrap,
    tmp_path: Path,
    model: str | None,
    tool: str,
) -> None:
    proxy = proxy_factory(**QUIET)
    codex = Codex(proxy, trap, tmp_path, model)
    call = ToolCallSpec("exec_command", json.dumps({"cmd": "echo memlane-ok"}), "call_memlane_1")
    upstream.script(
        Reply(reasoning="Run the command first.", tool_calls=[call]),
        Reply(text=FINAL),
        Reply(text="You are welcome."),
    )

    assert codex.run(PROMPT, todo=TODO).stdout.strip() == FINAL
    assert codex.run("resume", "--last", "thanks", todo="done").stdout.strip() == "You are welcome."
    proxy.drain()
    assert trap.attempts == []  # Codex reached nothing but 127.0.0.1
    requests = upstream.model_requests
    assert len(requests) == 3
    first, second, third = requests

    # Codex's requests as the upstream got them: its own fields, memlane's headers gone
    key = first.json["prompt_cache_key"]
    for request in requests:
        body, headers = request.json, request.headers
        assert request.path == "/v1/responses"
        assert body["stream"] is True
        assert body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]
        assert tool in tool_names(body)
        assert body["prompt_cache_key"] == headers["session-id"] == key
        assert not [name for name in headers if name.startswith("x-memlane-")]
        assert headers["authorization"] == f"Bearer {API_KEY}"
        assert headers["originator"] == "codex_exec"

    # the agentic loop: reasoning (with the upstream's encrypted content) and the call
    # come back with the command's real output
    tail = second.json["input"][-3:]
    assert [item["type"] for item in tail] == ["reasoning", "function_call", "function_call_output"]
    assert tail[0]["encrypted_content"].startswith("enc:")
    assert tail[1]["call_id"] == tail[2]["call_id"] == "call_memlane_1"
    assert "memlane-ok" in tail[2]["output"]

    # the state block: a developer item after the first request's items, re-inserted at
    # the same place later; the resumed turn's new TODO adds a block after "thanks"
    block = state_blocks(first)
    assert len(block) == 1
    assert first.json["input"][-1] is block[0]
    assert block[0]["role"] == "developer"
    assert "<todo>\n1. run the command\n2. report what it printed\n</todo>" in text_of(block[0])
    assert text_of(first.json["input"][-2]) == PROMPT
    assert state_blocks(second) == block
    assert [text_of(i) for i in third.json["input"][-2:]] == [
        "thanks",
        "<memlane_state>\n<todo>\ndone\n</todo>\n</memlane_state>",
    ]

    # prefix stability, within a run and across Codex's resume from its own rollout file
    assert extends(first, second)
    assert extends(second, third)

    # stored once per message, in order, under Codex's session id, in the repo's namespace
    session = proxy.store.find_session(key)
    assert session is not None
    assert session.namespace == REPO
    assert [s.key for s in proxy.store.list_sessions()] == [key]
    rows = stored(proxy, key)
    items = first.json["input"][:-1]  # Codex's instructions, context and prompt
    codex_items = len(items)
    assert [r[:3] for r in rows[:codex_items]] == [(i["role"], "message", "client") for i in items]
    assert [r[3] for r, i in zip(rows, items, strict=False) if i["type"] == "message"] == [
        text_of(i) for i in items if i["type"] == "message"
    ]
    assert [r[:4] for r in rows[codex_items - 1 :]] == [
        ("user", "message", "client", PROMPT),
        ("developer", "message", "state", text_of(block[0])),
        ("assistant", "reasoning", "client", "Run the command first."),
        ("assistant", "tool_call", "client", ""),
        ("tool", "tool_result", "client", tail[2]["output"]),
        ("assistant", "message", "client", FINAL),
        ("user", "message", "client", "thanks"),
        ("developer", "message", "state", text_of(third.json["input"][-1])),
        ("assistant", "message", "client", "You are welcome."),
    ]
    assert all(r[4] == "ok" for r in rows)
    call_row = proxy.store.list_messages(session.id)[codex_items + 2].message
    assert [(c.id, c.name) for c in call_row.tool_calls] == [("call_memlane_1", "exec_command")]

    # the API key Codex sent went upstream (above) and is nowhere in memlane's home
    home = Path(proxy.settings.home_path)
    leaked = [p for p in home.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    assert leaked == []


FACT = "We deploy the shop to blue-kestrel-7"


def project_facts(request: RecordedRequest) -> Reply | None:
    """memlane's own fact extraction (its FACT_PROMPT), answered with the fact the user said;
    Codex's requests fall through to the script."""
    messages = request.json.get("messages") if request.path.endswith("/chat/completions") else None
    if not messages:
        return None
    if messages[0].get("content") == FACT_PROMPT:
        said = "blue-kestrel-7" in str(messages[-1].get("content"))
        return Reply(text=json.dumps([FACT] if said else []))
    return Reply(text="[]")  # reconciliation and the rest: nothing to change


def exec_in(codex: Codex, folder: Path, prompt: str) -> str:
    """A new `codex exec` thread started in `folder`, with no memlane header at all."""
    command = [
        str(codex.binary),
        "exec",
        "--skip-git-repo-check",
        "--color=never",
        *codex.model,
        f"--cd={folder}",
        *(arg for override in OFFLINE for arg in ("-c", override)),
        prompt,
    ]
    result = subprocess.run(
        command,
        env=codex.env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CODEX_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"codex exec failed:\n{result.stderr[-3000:]}"
    return result.stdout.strip()


def test_a_new_codex_thread_in_the_same_repository_recalls_what_an_earlier_one_learned(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream, trap: NetworkTrap, tmp_path: Path
) -> None:
    """No header, no set-up: Codex's working directory names the project (its git root),
    so a fact said in one thread reaches a new thread in a subfolder of the same
    repository, and not a thread in another repository."""
    proxy = proxy_factory(index_enabled=False)
    codex = Codex(proxy, trap, tmp_path, "scripted-small")
    shop, garden = tmp_path / "code" / "shop", tmp_path / "code" / "garden"
    for repo in (shop, garden):
        (repo / ".git").mkdir(parents=True)
    (shop / "src").mkdir()
    upstream.respond_with(project_facts)
    upstream.script(Reply(text="Noted."), Reply(text="To blue-kestrel-7."), Reply(text="No idea."))

    assert exec_in(codex, shop, f"Remember: {FACT}.") == "Noted."
    proxy.drain()
    facts = proxy.store.list_facts(scope=f"ns:{shop.resolve()}", roles=("memory",))
    assert [f.text for f in facts] == [FACT]
    assert exec_in(codex, shop / "src", "Where do we deploy the shop?") == "To blue-kestrel-7."
    assert exec_in(codex, garden, "Where do we deploy the shop?") == "No idea."
    proxy.drain()
    assert trap.attempts == []

    first, same_project, other_project = [
        r for r in upstream.model_requests if r.path == "/v1/responses"
    ]
    assert "blue-kestrel-7" in str(same_project.json["input"])  # recalled into the new thread
    assert "blue-kestrel-7" not in str(other_project.json["input"])  # never another project's
    namespaces = {s.key: s.namespace for s in proxy.store.list_sessions()}
    assert namespaces == {
        first.json["prompt_cache_key"]: str(shop.resolve()),
        same_project.json["prompt_cache_key"]: str(shop.resolve()),
        other_project.json["prompt_cache_key"]: str(garden.resolve()),
    }
