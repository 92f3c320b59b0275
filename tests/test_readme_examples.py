"""Every `sh` and `python` block of the README and of the documentation site runs as written,
in the order a reader meets them, on one home, against a scripted upstream.

The order is the README's, then the site's pages in the order of its navigation
(`mkdocs.yml`): a block may rely on what an earlier one did, as it would for a
reader following along, and must not break on what an earlier one left behind.
A block that cannot run here says why on the line before it
(`<!-- not run: … -->`). The harness changes only what a reader changes too:
the proxy listens on a free port instead of 8100 (and `OPENAI_BASE_URL`, which
the quick start exports, points at it), `ID` is the newest memory's id and `DIR`
an empty folder. Shell blocks run statement by statement, with the proxy's
background work drained between them (a reader looks at one output before
typing the next command).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from memlane.engine.memory.extract import FACT_PROMPT
from tests.support.anthropic_upstream import ScriptedAnthropic
from tests.support.site import nav_pages
from tests.support.upstream import ProxyFactory, RecordedRequest, Reply, ScriptedUpstream

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
READER_PORT = "127.0.0.1:8100"


@dataclass(frozen=True)
class Block:
    page: str
    lang: str
    code: str
    line: int
    reason: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def reading_order() -> list[Path]:
    """The README, then the site's pages as its navigation lists them."""
    return [README, *(ROOT / "docs" / page for page in nav_pages())]


def page_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(ROOT))
    found = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(name, match.group(1), match.group(2), line, reason and reason.group(1)))
    return found


BLOCKS = [block for page in reading_order() for block in page_blocks(page)]
RUN = [b for b in BLOCKS if b.reason is None]


def test_every_skipped_block_says_why() -> None:
    skipped = [b for b in BLOCKS if b.reason is not None]
    assert {b.page for b in RUN} >= {"README.md", "docs/getting-started.md"}
    assert all(len(b.reason or "") > 10 for b in skipped)


def statements(code: str) -> list[str]:
    """Shell lines joined across trailing backslashes, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def memlane_answers(request: RecordedRequest) -> Reply:
    """memlane's own fact extraction finds the preference; anything else gets a plain answer."""
    system = request.messages[0].get("content") if request.messages else None
    if system == FACT_PROMPT:
        return Reply(text='["The user prefers tabs"]')
    return Reply(text="Noted.")


class Reader:
    """One reader's machine: a home, a running proxy and a shell environment."""

    def __init__(
        self,
        proxy_factory: ProxyFactory,
        upstream: ScriptedUpstream,
        anthropic: ScriptedAnthropic,
        tmp_path: Path,
    ) -> None:
        upstream.respond_with(memlane_answers)
        self.upstream = upstream
        anthropic.respond_with(lambda _request: Reply(text="Noted."))
        self.proxy = proxy_factory(index_enabled=False, anthropic_upstream_url=anthropic.base)
        self.tmp = tmp_path
        home = self.proxy.settings.home_path
        (tmp_path / ".venv").symlink_to(ROOT / ".venv")
        # `~/.local/share/memlane` (the default home) is this reader's home too
        (tmp_path / ".local" / "share").mkdir(parents=True)
        (tmp_path / ".local" / "share" / "memlane").symlink_to(home)
        editor = tmp_path / "editor.sh"
        editor.write_text("#!/bin/sh\nsed -i 's/tabs/tabs (edited)/' \"$1\"\n")
        editor.chmod(0o755)
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("MEMLANE_", "OPENAI_", "ANTHROPIC_"))
            },
            "HOME": str(tmp_path),
            "XDG_DATA_HOME": str(tmp_path / "share"),
            "MEMLANE_HOME": str(home),
            "MEMLANE_UPSTREAM_URL": upstream.url,
            "MEMLANE_EMBEDDING_BACKEND": "hashing",
            "OPENAI_BASE_URL": self.proxy.url,  # as the quick start exports it
            "OPENAI_API_KEY": "sk-reader-openai-key",  # the reader's own keys, sent upstream
            "ANTHROPIC_API_KEY": "sk-ant-reader-anthropic-key",
            "EDITOR": str(editor),
            "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        }
        self.port = self.proxy.base.rsplit(":", 1)[1]

    def at_our_port(self, code: str) -> str:
        return code.replace(READER_PORT, f"127.0.0.1:{self.port}")

    def run(self, block: Block) -> None:
        if block.lang == "python":
            self.run_python(block)
        else:
            self.run_shell(block)

    def run_python(self, block: Block) -> None:
        self.proxy.drain()
        done = subprocess.run(
            [sys.executable, "-c", self.at_our_port(block.code)],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{block.where}:\n{done.stderr}"

    def run_shell(self, block: Block) -> None:
        script = "".join(self.at_our_port(s) + "\n" for s in statements(block.code))
        outputs = []
        for statement in statements(script):
            self.proxy.drain()
            newest = self.proxy.store.list_facts(roles=("memory",), include_deleted=True)
            command = re.sub(r"\bID\b", newest[-1].id if newest else "ID", statement)
            command = re.sub(r"\bDIR\b", str(self.tmp / "export"), command)
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", _exports(script, statement) + command],
                env=self.env,
                cwd=self.tmp,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, f"{block.where}: {statement}\n{done.stderr}"
            assert "Traceback" not in done.stderr, f"{block.where}: {statement}\n{done.stderr}"
            outputs.append(done.stdout)
        if 'memory search "tabs"' in block.code:  # the fact the quick start's turn taught
            found = [" ".join(out.split()) for out in outputs]
            assert any("The user prefers tabs" in out for out in found), (block.where, outputs)
        if "X-Memlane-Session: tuesday" in block.code:  # a new session gets it back
            self.recalled_in_a_new_session(block)

    def recalled_in_a_new_session(self, block: Block) -> None:
        """The quick start's promise: the second session's forwarded request carries the
        preference the first one taught, before its question, which stays last."""
        asked = [
            r
            for r in self.upstream.requests
            if r.messages and r.messages[-1].get("content") == "Tabs or spaces?"
        ]
        assert asked, block.where
        before = " ".join(str(m.get("content")) for m in asked[-1].messages[:-1])
        assert "The user prefers tabs" in before, (block.where, asked[-1].messages)


@pytest.mark.timeout(600)  # ~25 blocks, each its own process: 90-120 s on two busy cores
def test_every_block_runs_in_reading_order(
    proxy_factory: ProxyFactory,
    upstream: ScriptedUpstream,
    anthropic_upstream: ScriptedAnthropic,
    tmp_path: Path,
) -> None:
    reader = Reader(proxy_factory, upstream, anthropic_upstream, tmp_path)
    for block in RUN:
        reader.run(block)
    assert {b.page for b in RUN} >= {"README.md", "docs/guides/library.md"}


def _exports(script: str, upto: str) -> str:
    """The block's `export` lines before `upto`: each statement runs in its own shell."""
    lines = statements(script)
    before = lines[: lines.index(upto)]
    return "".join(line + "\n" for line in before if line.startswith("export "))
